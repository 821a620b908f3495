#ifndef COFFER_NAME_H
#define COFFER_NAME_H

#include <stddef.h>

/*
 * Names that become parts of file names and of what people type: export
 * targets and bundles, policy sections, snapshot tags.  One alphabet for
 * all of them: letters, digits, '.', '_' and '-' (no '/', no space, no
 * byte a shell or a URL would treat specially).
 */

/* How many bytes from the start of s are of that alphabet. */
size_t name_span(const char *s);

/* 1 if s is 1 to max bytes of it and starts with neither '.' (a hidden
 * file) nor '-' (an option), else 0. */
int name_ok(const char *s, size_t max);

/* Free a malloc'd array of n malloc'd strings (lists of pack names,
 * targets, globs); NULL is fine. */
void names_free(char **v, size_t n);

#endif
