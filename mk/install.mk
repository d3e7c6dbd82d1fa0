# mk/install.mk (included by the Makefile): make man, make install PREFIX=... DESTDIR=..., make deb
PREFIX  ?= /usr/local
DESTDIR ?=
MANDIR  ?= $(PREFIX)/share/man

.PHONY: man install deb
man: $(BUILD)/drover $(BUILD)/drover-agent
	@mk/man.sh $(BUILD) $(BUILD)/man

# Programs, the agent's systemd unit, completions generated from the verb table, man pages,
# the example inventory and alert rules.  No sudo, no service started: a package's job.
install: all man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
	  $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(PREFIX)/lib/systemd/system \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
	  $(DESTDIR)$(PREFIX)/share/doc/drover
	install -m 0755 $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	sed 's|/usr/local/bin/drover-agent|$(PREFIX)/bin/drover-agent|' systemd/drover-agent.service \
	  >$(DESTDIR)$(PREFIX)/lib/systemd/system/drover-agent.service
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/drover-agent.service
	$(BUILD)/drover completion bash >$(DESTDIR)$(PREFIX)/share/bash-completion/completions/drover
	$(BUILD)/drover completion zsh >$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_drover
	install -m 0644 $(BUILD)/man/drover.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(BUILD)/man/drover.ini.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(BUILD)/man/drover-agent.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 deploy/drover.ini.example deploy/drover-alerts.yml $(DESTDIR)$(PREFIX)/share/doc/drover/

# A Debian package of drover and drover-agent (the unit, completions, man pages):
# build/drover_<version>_<arch>.deb, built with dpkg-deb alone (mk/deb.sh; tests/test-deb.sh).
deb: all man
	@mk/deb.sh $(BUILD)
