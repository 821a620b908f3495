#ifndef COFFER_HEX_H
#define COFFER_HEX_H

#include <stddef.h>
#include <stdint.h>

/* Write 2n lowercase hex digits and a NUL to out (2n+1 bytes). */
void hex_encode(char *out, const uint8_t *in, size_t n);
/* The value of one hex digit (either case), or -1. */
int hex_value(int c);
/* Decode exactly 2n hex digits from in; 0, or -1 on a bad digit or length. */
int hex_decode(uint8_t *out, size_t n, const char *in);

#endif
