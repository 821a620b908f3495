#include <string.h>

#include "coffer/hex.h"

void
hex_encode(char *out, const uint8_t *in, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

int
hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return (c - '0');
	if (c >= 'a' && c <= 'f')
		return (c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (c - 'A' + 10);
	return (-1);
}

int
hex_decode(uint8_t *out, size_t n, const char *in)
{
	size_t i;
	int hi, lo;

	for (i = 0; i < n; i++) {
		if ((hi = hex_value((unsigned char)in[2 * i])) < 0)
			return (-1);
		if ((lo = hex_value((unsigned char)in[2 * i + 1])) < 0)
			return (-1);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (0);
}
