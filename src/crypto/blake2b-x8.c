/*
 * BLAKE2b of many inputs under one key (chunk ids of a batch), eight side
 * by side: one input per 64-bit lane of the AVX-512 registers, each vector
 * instruction doing one step of blake2b.c's compression function for eight
 * blocks of eight inputs.  The rounds of one input are a chain of
 * dependent additions, rotations and xors that vectors cannot shorten (a
 * vectorized single input is no faster than the scalar code); eight
 * independent inputs keep the vector units busy: eight full lanes hash
 * about three times as many bytes a second as the scalar code.
 *
 * A lane whose input ends takes the next one.  Once no input is left to
 * take and fewer than SCALAR_BELOW lanes still run, they are finished by
 * the scalar code, which does one input faster than a lane does.  The
 * output is blake2b()'s, byte for byte (t-crypto checks it against
 * libsodium's crypto_generichash); elsewhere, or with
 * COFFER_BLAKE2B_X8=0 in the environment, the inputs are hashed one
 * after another.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "blake2b.h"
#include "coffer/tuning.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X8 1
#endif

#define LANES 8
#define SCALAR_BELOW 3

#ifdef HAVE_X8
#define X8 __attribute__((target("avx512f")))

/* blake2b.c's G, on eight lanes. */
#define G8(a, b, c, d, x, y) do {					\
	a = _mm512_add_epi64(_mm512_add_epi64(a, b), x);		\
	d = _mm512_ror_epi64(_mm512_xor_si512(d, a), 32);		\
	c = _mm512_add_epi64(c, d);					\
	b = _mm512_ror_epi64(_mm512_xor_si512(b, c), 24);		\
	a = _mm512_add_epi64(_mm512_add_epi64(a, b), y);		\
	d = _mm512_ror_epi64(_mm512_xor_si512(d, a), 16);		\
	c = _mm512_add_epi64(c, d);					\
	b = _mm512_ror_epi64(_mm512_xor_si512(b, c), 63);		\
} while (0)

#define ROUND8(s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12,	\
    s13, s14, s15) do {							\
	G8(v[0], v[4], v[8], v[12], m[s0], m[s1]);			\
	G8(v[1], v[5], v[9], v[13], m[s2], m[s3]);			\
	G8(v[2], v[6], v[10], v[14], m[s4], m[s5]);			\
	G8(v[3], v[7], v[11], v[15], m[s6], m[s7]);			\
	G8(v[0], v[5], v[10], v[15], m[s8], m[s9]);			\
	G8(v[1], v[6], v[11], v[12], m[s10], m[s11]);			\
	G8(v[2], v[7], v[8], v[13], m[s12], m[s13]);			\
	G8(v[3], v[4], v[9], v[14], m[s14], m[s15]);			\
} while (0)

/* The lanes' chaining values, word-major, and their next blocks. */
struct lanes {
	uint64_t h[8][LANES];		/* word w of lane l: h[w][l] */
	uint64_t addr[LANES];		/* the block each compresses next */
	uint64_t t[LANES];		/* bytes counted, that block's too */
	uint64_t f[LANES];		/* all ones: it is the last block */
} __attribute__((aligned(64)));

/* The input a lane is on. */
struct lane {
	const uint8_t *p;		/* its next block */
	size_t left;			/* bytes from p on; > 0 while on */
	size_t i;			/* which input */
	int on;
};

/* One block in each lane of on; the other lanes are left as they are. */
X8 static void
compress8(struct lanes *L, __mmask8 on)
{
	__m512i m[16], v[16], a, h;
	int i;

	/* Word i of each lane's block, gathered from eight addresses. */
	a = _mm512_load_si512(L->addr);
	for (i = 0; i < 16; i++)
		m[i] = _mm512_i64gather_epi64(_mm512_add_epi64(a,
		    _mm512_set1_epi64(8 * i)), (const void *)0, 1);
	for (i = 0; i < 8; i++) {
		v[i] = _mm512_load_si512(L->h[i]);
		v[8 + i] = _mm512_set1_epi64((long long)blake2b_iv[i]);
	}
	v[12] = _mm512_xor_si512(v[12], _mm512_load_si512(L->t));
	v[14] = _mm512_xor_si512(v[14], _mm512_load_si512(L->f));

	BLAKE2B_ROUNDS(ROUND8);

	for (i = 0; i < 8; i++) {
		h = _mm512_load_si512(L->h[i]);
		h = _mm512_mask_xor_epi64(h, on, h,
		    _mm512_xor_si512(v[i], v[8 + i]));
		_mm512_store_si512(L->h[i], h);
	}
}

/* A lane's input, finished one block at a time by the scalar code. */
static void
finish_scalar(const struct lanes *L, const struct lane *ln, size_t l,
    const struct blake2b_state *k0, uint8_t *out)
{
	struct blake2b_state s = *k0;
	size_t w;

	for (w = 0; w < 8; w++)
		s.h[w] = L->h[w][l];
	s.t[0] = L->t[l];
	s.t[1] = 0;
	blake2b_update(&s, ln->p, ln->left);
	blake2b_final(&s, out);
}

/*
 * The non-empty inputs, from k0: the key block compressed, nothing
 * buffered.  Counts stay below 2^64 bytes, so t[1] is 0 throughout.
 */
X8 static void
many_x8(uint8_t *out, size_t outlen, size_t n, const uint8_t *const *in,
    const size_t *len, const struct blake2b_state *k0)
{
	static const uint8_t idle[BLAKE2B_BLOCK];
	uint8_t pad[LANES][BLAKE2B_BLOCK] __attribute__((aligned(64)));
	uint8_t full[BLAKE2B_OUT_MAX];
	struct lanes L;
	struct lane ln[LANES];
	size_t next = 0, non, l, w;
	unsigned on, last;

	memset(ln, 0, sizeof(ln));
	for (;;) {
		non = 0;
		for (l = 0; l < LANES; l++) {
			while (!ln[l].on && next < n) {
				if (len[next] > 0) {
					ln[l].p = in[next];
					ln[l].left = len[next];
					ln[l].i = next;
					ln[l].on = 1;
					for (w = 0; w < 8; w++)
						L.h[w][l] = k0->h[w];
					L.t[l] = k0->t[0];
				}
				next++;
			}
			non += ln[l].on;
		}
		if (non == 0)
			break;
		if (next == n && non < SCALAR_BELOW) {
			for (l = 0; l < LANES; l++)
				if (ln[l].on)
					finish_scalar(&L, &ln[l], l, k0,
					    out + ln[l].i * outlen);
			break;
		}
		on = last = 0;
		for (l = 0; l < LANES; l++) {
			struct lane *x = &ln[l];

			L.f[l] = 0;
			if (!x->on) {
				L.addr[l] = (uintptr_t)idle;
				continue;
			}
			on |= 1u << l;
			if (x->left > BLAKE2B_BLOCK) {
				L.addr[l] = (uintptr_t)x->p;
				L.t[l] += BLAKE2B_BLOCK;
				x->p += BLAKE2B_BLOCK;
				x->left -= BLAKE2B_BLOCK;
				continue;
			}
			/* The last block, zero-padded (RFC 7693 3.3). */
			memcpy(pad[l], x->p, x->left);
			memset(pad[l] + x->left, 0, BLAKE2B_BLOCK - x->left);
			L.addr[l] = (uintptr_t)pad[l];
			L.t[l] += x->left;
			L.f[l] = ~(uint64_t)0;
			x->left = 0;
			last |= 1u << l;
		}
		compress8(&L, (__mmask8)on);
		for (l = 0; l < LANES; l++) {
			if (!(last & (1u << l)))
				continue;
			for (w = 0; w < 8; w++)
				memcpy(full + 8 * w, &L.h[w][l], 8);
			memcpy(out + ln[l].i * outlen, full, outlen);
			ln[l].on = 0;
		}
	}
	sodium_memzero(&L, sizeof(L));
	sodium_memzero(full, sizeof(full));
}

/* AVX-512 here, and not turned off (for comparisons). */
static int
use_x8(void)
{
	static atomic_int use = -1;
	int u = atomic_load_explicit(&use, memory_order_relaxed);

	if (u == -1) {
		u = __builtin_cpu_supports("avx512f") &&
		    tuning_get()->blake2b_x8;
		atomic_store_explicit(&use, u, memory_order_relaxed);
	}
	return (u);
}
#endif

void
blake2b_many(uint8_t *out, size_t outlen, size_t n,
    const uint8_t *const *in, const size_t *len, const void *key,
    size_t keylen)
{
	size_t i;
#ifdef HAVE_X8
	struct blake2b_state k0;
	size_t full = 0;

	for (i = 0; i < n; i++)
		full += len[i] > 0;
	if (full >= SCALAR_BELOW && keylen > 0 && use_x8()) {
		/* An empty input's last block is the key block. */
		for (i = 0; i < n; i++)
			if (len[i] == 0)
				blake2b(out + i * outlen, outlen, in[i], 0,
				    key, keylen);
		blake2b_init(&k0, outlen, key, keylen);
		blake2b_continue(&k0);
		many_x8(out, outlen, n, in, len, &k0);
		sodium_memzero(&k0, sizeof(k0));
		return;
	}
#endif
	for (i = 0; i < n; i++)
		blake2b(out + i * outlen, outlen, in[i], len[i], key, keylen);
}
