#!/usr/bin/perl
# tests/lab/pct-copy.pl: the copy half of the lab's `pct push` / `pct pull` (test infrastructure).
#
# Owns only the file copy between the host and a running container's mount namespace, with the
# real pct's semantics (PCT.md): the destination is opened inside the container's mount namespace
# (so its symlinks resolve there), parents are never created, a new file gets 0666 & ~umask unless
# a mode is given (the mode is then exact, not masked), an existing file is truncated and rewritten
# in place and keeps its mode, user/group names resolve in the container.  Errors before the
# copy (opening, creating, chown) are printed; a copy that fails midway (disk full) is silent,
# as File::Copy's result is ignored in real pct.  It never decides pct's exit status: the caller
# exits 0 whatever happens here.
#
#   pct-copy.pl push PID SRC DEST PERMS USER GROUP    (empty string = option not given)
#   pct-copy.pl pull PID PATH DEST PERMS USER GROUP
use strict;
use warnings;
use Fcntl;
use POSIX ();

my $CLONE_NEWNS = 0x00020000;
my %SYS_SETNS = (x86_64 => 308, aarch64 => 268, ppc64le => 350, s390x => 339);

sub enter_mntns {
	my ($pid) = @_;
	my $arch = (POSIX::uname())[4];
	my $nr = $SYS_SETNS{$arch} // die "setns syscall number unknown for $arch\n";
	sysopen(my $ns, "/proc/$pid/ns/mnt", O_RDONLY)
	    or die "failed to open the container's mount namespace\n";
	syscall($nr, fileno($ns), $CLONE_NEWNS) == 0
	    or die "failed to enter the container's mount namespace\n";
	close($ns);
	chdir('/') or die "failed to change to container root directory\n";
}

sub resolve_id {
	my ($what, $name) = @_;
	return undef if $name eq '';
	return int($name) if $name =~ /^\d+$/;
	# PCT_SHIM_LEGACY_UID0=1: the pre-2021 bug where a name that resolves to 0 counts as missing
	my $id = $what eq 'uid' ? getpwnam($name) : getgrnam($name);
	undef $id if defined($id) && $id == 0 && ($ENV{PCT_SHIM_LEGACY_UID0} // '') eq '1';
	die "failed to get $what for: $name\n" if !defined($id);
	return $id;
}

# open PATH for writing the way pct does; returns the handle
sub create_file {
	my ($path, $perms, $user, $group) = @_;
	my $uid = resolve_id('uid', $user);
	my $gid = resolve_id('gid', $group);
	if ($perms ne '') {
		$perms = "0$perms" if $perms !~ /^0/;
		$! = 0;
		my ($mode, $unparsed) = POSIX::strtoul($perms, 0);
		die "invalid mode: '$perms'\n" if $unparsed || $!;
		$perms = $mode;
	} else {
		undef $perms;
	}
	my $fd;
	if (sysopen($fd, $path, O_WRONLY | O_CREAT | O_EXCL, 0)) {
		$perms = 0666 & ~umask() if !defined($perms);
	} else {
		sysopen($fd, $path, O_WRONLY | O_CREAT | O_TRUNC)
		    or die "failed to create file: $path: $!\n";
	}
	chmod($perms, $fd) if defined($perms);
	if (defined($uid) || defined($gid)) {
		my ($fuid, $fgid) = (stat($fd))[4, 5];
		chown($uid // $fuid, $gid // $fgid, $fd) or die "failed to change file owner: $!\n";
	}
	return $fd;
}

# Like File::Copy::copy in real pct, whose result pct ignores: a failed read or write (disk
# full, I/O error) stops the copy and leaves a short file, silently.
sub copy_fd {
	my ($in, $out) = @_;
	my $buf;
	while (1) {
		my $n = sysread($in, $buf, 65536);
		return 0 if !defined($n);
		last if $n == 0;
		my $off = 0;
		while ($off < $n) {
			my $w = syswrite($out, $buf, $n - $off, $off);
			return 0 if !defined($w);
			$off += $w;
		}
	}
	return close($out) ? 1 : 0;
}

my ($op, $pid, $from, $to, $perms, $user, $group) = @ARGV;
die "usage: pct-copy.pl push|pull PID FROM TO PERMS USER GROUP\n" if !defined($group);
umask(022);
eval {
	if ($op eq 'push') {
		sysopen(my $src, $from, O_RDONLY) or die "failed to open $from for reading\n";
		enter_mntns($pid);
		my $dst = create_file($to, $perms, $user, $group);
		copy_fd($src, $dst);
	} elsif ($op eq 'pull') {
		my $dst = create_file($to, $perms, $user, $group);
		enter_mntns($pid);
		open(my $src, '<', $from) or die "failed to open $from: $!\n";
		copy_fd($src, $dst);
	} else {
		die "unknown operation '$op'\n";
	}
};
if (my $err = $@) {
	print STDERR $err;
	exit 1;
}
exit 0;
