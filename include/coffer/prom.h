#ifndef COFFER_PROM_H
#define COFFER_PROM_H

#include "coffer/buf.h"

/*
 * Prometheus text exposition format (what node_exporter's textfile
 * collector reads), appended to a buffer: a metrics file is written whole
 * and atomically (fsutil_write_file), so a collector never reads half of
 * one.  Each returns 0, or -1 when out of memory (reported by buf).
 */

/* A family's header: "# HELP name help" and "# TYPE name type" (gauge,
 * counter, ...), help's backslashes and newlines escaped. */
int prom_family(struct buf *b, const char *name, const char *type,
    const char *help);

/*
 * One sample: name{label="value"} v, or name v when label is NULL; the
 * label's value escaped (backslash, double quote, newline), v printed
 * with decimals digits after the point.
 */
int prom_sample(struct buf *b, const char *name, const char *label,
    const char *value, double v, int decimals);

#endif
