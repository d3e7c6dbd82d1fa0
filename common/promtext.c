/* common/promtext.c: see promtext.h. */
#include "common/promtext.h"

#include <math.h>
#include <stdlib.h>

void prom_head(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prom_label(FILE *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fprintf(out, "\\%c", *v);
        else if (*v == '\n')
            fputs("\\n", out);
        else
            fputc(*v, out);
    }
}

const char *prom_number(double v, char *buf, size_t buf_sz)
{
    if (isnan(v))
        snprintf(buf, buf_sz, "NaN");
    else if (isinf(v))
        snprintf(buf, buf_sz, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, buf_sz, "%.0f", v);
    else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, buf_sz, "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    }
    return buf;
}

void prom_sample(FILE *out, const char *name, const char *const *labels, double v)
{
    fputs(name, out);
    if (labels && labels[0]) {
        fputc('{', out);
        for (size_t i = 0; labels[i] && labels[i + 1]; i += 2) {
            fprintf(out, "%s%s=\"", i ? "," : "", labels[i]);
            prom_label(out, labels[i + 1]);
            fputc('"', out);
        }
        fputc('}', out);
    }
    char num[40];
    fprintf(out, " %s\n", prom_number(v, num, sizeof num));
}
