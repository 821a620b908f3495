#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/prom.h"

/* s with backslash and newline escaped, and double quote when quote. */
static int
put_escaped(struct buf *b, const char *s, int quote)
{
	int rc = 0;

	for (; *s && rc == 0; s++) {
		if (*s == '\\')
			rc = buf_puts(b, "\\\\");
		else if (*s == '"' && quote)
			rc = buf_puts(b, "\\\"");
		else if (*s == '\n')
			rc = buf_puts(b, "\\n");
		else
			rc = buf_put_u8(b, (uint8_t)*s);
	}
	return (rc);
}

int
prom_family(struct buf *b, const char *name, const char *type,
    const char *help)
{
	if (buf_printf(b, "# HELP %s ", name) || put_escaped(b, help, 0) ||
	    buf_printf(b, "\n# TYPE %s %s\n", name, type))
		return (-1);
	return (0);
}

int
prom_sample(struct buf *b, const char *name, const char *label,
    const char *value, double v, int decimals)
{
	if (buf_puts(b, name) || (label && (buf_printf(b, "{%s=\"", label) ||
	    put_escaped(b, value, 1) || buf_puts(b, "\"}"))) ||
	    buf_printf(b, " %.*f\n", decimals, v))
		return (-1);
	return (0);
}
