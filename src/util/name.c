/* Names of targets, bundles, policy sections and tags (coffer/name.h). */
#include <stdlib.h>
#include <string.h>

#include "coffer/name.h"

static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

size_t
name_span(const char *s)
{
	return (strspn(s, alphabet));
}

int
name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	return (n > 0 && n <= max && s[0] != '.' && s[0] != '-' &&
	    name_span(s) == n);
}

void
names_free(char **v, size_t n)
{
	if (v == NULL)
		return;
	while (n > 0)
		free(v[--n]);
	free(v);
}
