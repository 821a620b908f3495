/*
 * array_grow and buf_reserve: the growable arrays and buffers everything
 * else is built on.  An array may be asked for room at an index past its
 * capacity, not only at the next one: a caller that starts filling at
 * index k (an export resuming at a later part) got the first capacity
 * and wrote past it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/buf.h"
#include "tap.h"

int
main(void)
{
	struct buf b = BUF_INIT;
	size_t *a = NULL, cap = 0, i;
	int rc;

	ok(array_grow(&a, &cap, 0, sizeof(*a), 16) == 0 && cap == 16,
	    "an empty array takes its first capacity");
	ok(array_grow(&a, &cap, 15, sizeof(*a), 16) == 0 && cap == 16,
	    "an index within it needs nothing");
	ok(array_grow(&a, &cap, 16, sizeof(*a), 16) == 0 && cap == 32,
	    "the next index doubles it");
	for (i = 0; i < 32; i++)
		a[i] = i;
	rc = array_grow(&a, &cap, 300, sizeof(*a), 16);
	ok(rc == 0 && cap > 300, "an index far past it: capacity %zu", cap);
	a[300] = 300;
	for (i = 0; i < 32 && a[i] == i; i++)
		;
	ok(i == 32, "what it held is kept");
	free(a);
	a = NULL;
	cap = 0;
	rc = array_grow(&a, &cap, 1000, sizeof(*a), 64);
	ok(rc == 0 && cap > 1000, "an empty array asked for index 1000: "
	    "capacity %zu", cap);
	a[1000] = 1;
	free(a);
	a = NULL;
	cap = 0;
	diag("an out of memory error is expected next");
	ok(array_grow(&a, &cap, SIZE_MAX / 2 + 1, 1, 16) == -1 && a == NULL &&
	    cap == 0, "an index beyond memory is refused, the array unchanged");

	ok(buf_reserve(&b, 100) == 0 && b.cap > 100, "buf_reserve");
	memset(b.data, 'x', 100);
	b.len = 100;
	ok(buf_reserve(&b, 5000) == 0 && b.cap > 5100 && b.data[99] == 'x',
	    "a buffer grows keeping its bytes");
	buf_release(&b);
	return (tap_done());
}
