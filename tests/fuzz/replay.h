#ifndef COFFER_FUZZ_REPLAY_H
#define COFFER_FUZZ_REPLAY_H

#include <stddef.h>

/*
 * For the targets' fuzz_seeds, built only into the replay driver
 * (-DFUZZ_REPLAY; tests/fuzz/replay.c): write n bytes as dir/name.
 * 0, or -1 (reported).
 */
int fuzz_write_seed(const char *dir, const char *name, const void *p,
    size_t n);
/* Write the target's seed inputs into dir: 0, or -1. */
int fuzz_seeds(const char *dir);

#endif
