/*
 * bench/gen.c: a deterministic generator of a training server's tree, for
 * `make bench`.  Same --seed and --scale, same bytes (file times aside).
 *
 *   gen [--scale S] [--seed N] [--manifest FILE] OUT
 *   gen --mutate [--manifest FILE] OUT
 *
 * At scale 1 the tree is about 2 GiB:
 *
 *   ckpt/step_01000/, ckpt/step_02000/   512 MiB each: model-0000K-of-00004
 *       .safetensors shards (real safetensors: u64le header length, JSON
 *       header with dtype BF16, shape and data_offsets, 8-byte aligned, then
 *       the tensors), tensors of 0.5-5.5 MiB of bf16 values drawn from a
 *       normal distribution; each step keeps about half of its tensors
 *       byte-for-byte from the previous step (frozen layers, chosen at
 *       random per tensor, so every shard mixes kept and changed tensors)
 *       and perturbs the others; plus trainer_state.json; ckpt/latest.
 *   data/text/shard_XX/doc_YYYYY.jsonl   20000 JSONL files of 1-20 KiB
 *   data/wds/shard-NNNN.tar              about 800 MiB of webdataset tar
 *       shards (64-256 MiB each) of incompressible "JPEGs" with .cls labels
 *
 * --mutate adds the next checkpoint step (about half of its tensors shared
 * with the latest step) and appends a few JSONL lines to about 1% of the
 * text files; it reads the seed and scale from ckpt/step_01000.
 *
 * --manifest FILE appends one line per tensor written, tab-separated:
 *   step_dir  shard_file  tensor_name  bytes  shared
 * where shared is 1 when the tensor's bytes equal those of the same tensor
 * in the previous step.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KiB 1024ULL
#define MiB (1024ULL * 1024ULL)

static const char *prog = "gen";

static void
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* ---- deterministic randomness ---------------------------------------- */

static uint64_t
splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A hash of up to four values: decisions that must not depend on order. */
static uint64_t
mix(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	uint64_t x = a;

	x = splitmix64(&x) ^ b;
	x = splitmix64(&x) ^ c;
	x = splitmix64(&x) ^ d;
	return splitmix64(&x);
}

struct rng {
	uint64_t s[4];
};

static void
rng_init(struct rng *r, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	uint64_t x = mix(a, b, c, d);

	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static inline uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256** */
static inline uint64_t
rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t res = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return res;
}

/* Uniform in [lo, hi]. */
static uint64_t
rng_range(struct rng *r, uint64_t lo, uint64_t hi)
{
	return lo + rng_next(r) % (hi - lo + 1);
}

static void
rng_fill(struct rng *r, uint8_t *p, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t v = rng_next(r);
		memcpy(p + i, &v, 8);
	}
	if (i < n) {
		uint64_t v = rng_next(r);
		memcpy(p + i, &v, n - i);
	}
}

/* ---- output helpers -------------------------------------------------- */

static char outdir[4096];
static unsigned long long bytes_written, files_written;

static void
mkdirs(const char *path)
{
	char tmp[4096];

	if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
		die("path too long: %s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			die("mkdir %s: %s", tmp, strerror(errno));
		*p = '/';
	}
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		die("mkdir %s: %s", tmp, strerror(errno));
}

static void
xpath(char *dst, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(dst, cap, "%s/", outdir);

	va_start(ap, fmt);
	n += vsnprintf(dst + n, cap - (size_t)n, fmt, ap);
	va_end(ap);
	if (n >= (int)cap)
		die("path too long");
}

struct out {
	int fd;
	const char *path;
};

static void
out_open(struct out *o, const char *path, int append)
{
	o->path = path;
	o->fd = open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC),
	    0644);
	if (o->fd < 0)
		die("open %s: %s", path, strerror(errno));
	if (!append)
		files_written++;
}

static void
out_write(struct out *o, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(o->fd, c, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("write %s: %s", o->path, strerror(errno));
		}
		c += w;
		n -= (size_t)w;
		bytes_written += (unsigned long long)w;
	}
}

static void
out_close(struct out *o)
{
	if (close(o->fd) != 0)
		die("close %s: %s", o->path, strerror(errno));
}

static void
write_small(const char *path, const char *text)
{
	struct out o;

	out_open(&o, path, 0);
	out_write(&o, text, strlen(text));
	out_close(&o);
}

/* A growable text buffer. */
struct sbuf {
	char *p;
	size_t len, cap;
};

static void
sb_grow(struct sbuf *b, size_t need)
{
	if (b->len + need + 1 <= b->cap)
		return;
	while (b->len + need + 1 > b->cap)
		b->cap = b->cap ? b->cap * 2 : 4096;
	b->p = realloc(b->p, b->cap);
	if (!b->p)
		die("out of memory");
}

static void __attribute__((format(printf, 2, 3)))
sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	sb_grow(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void
sb_putc(struct sbuf *b, char c)
{
	sb_grow(b, 1);
	b->p[b->len++] = c;
	b->p[b->len] = 0;
}

/* ---- the tree's shape ------------------------------------------------ */

static uint64_t seed = 1;
static double scale = 1.0;

#define STEP_EVERY	1000	/* step_01000, step_02000, ... */
#define INITIAL_STEPS	2
#define NSHARDS		4
#define COLS		1024	/* tensor shape [rows, 1024] */
#define TEXT_PER_DIR	1000

static uint64_t n_text, n_tensors, wds_bytes;

struct tensor {
	char name[80];
	uint64_t rows;
	float sigma;
};
static struct tensor *tensors;

static void
shape_init(void)
{
	static const char *kinds[] = {
		"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
		"self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
		"mlp.down_proj",
	};
	uint64_t step_bytes;

	n_text = (uint64_t)llround(20000.0 * scale);
	if (n_text < 1)
		n_text = 1;
	step_bytes = (uint64_t)llround(512.0 * MiB * scale);
	n_tensors = (uint64_t)llround((double)step_bytes / (3.0 * MiB));
	if (n_tensors < NSHARDS)
		n_tensors = NSHARDS;
	wds_bytes = (uint64_t)llround(800.0 * MiB * scale);

	tensors = calloc(n_tensors, sizeof *tensors);
	if (!tensors)
		die("out of memory");
	for (uint64_t i = 0; i < n_tensors; i++) {
		uint64_t h = mix(seed, 'T', i, 0);
		struct tensor *t = &tensors[i];

		snprintf(t->name, sizeof t->name, "model.layers.%llu.%s.weight",
		    (unsigned long long)(i / 7), kinds[i % 7]);
		/* 256..2816 rows of 1024 bf16: 0.5 .. 5.5 MiB */
		t->rows = 256 + h % (2816 - 256 + 1);
		t->sigma = (float)(0.006 + 0.044 * (double)((h >> 32) % 1000)
		    / 1000.0);
	}
}

static uint64_t
tensor_bytes(uint64_t i)
{
	return tensors[i].rows * COLS * 2;
}

static uint64_t
tensor_shard(uint64_t i)
{
	return i * NSHARDS / n_tensors;
}

/* Is tensor i of step index k (0-based) kept from step k-1? */
static int
frozen(uint64_t k, uint64_t i)
{
	return k > 0 && (mix(seed, 'F', k, i) & 1);
}

/* Version of tensor i at step index k: bumped whenever it is not frozen. */
static uint64_t
version(uint64_t k, uint64_t i)
{
	uint64_t v = 0;

	for (uint64_t j = 1; j <= k; j++)
		if (!frozen(j, i))
			v++;
	return v;
}

/* ---- bf16 ------------------------------------------------------------ */

static float normal_q[65536];	/* quantiles of N(0,1) */

/* Acklam's rational approximation of the inverse normal CDF. */
static double
inv_norm(double p)
{
	static const double a[] = { -3.969683028665376e+01,
		2.209460984245205e+02, -2.759285104469687e+02,
		1.383577518672690e+02, -3.066479806614716e+01,
		2.506628277459239e+00 };
	static const double b[] = { -5.447609879822406e+01,
		1.615858368580409e+02, -1.556989798598866e+02,
		6.680131188771972e+01, -1.328068155288572e+01 };
	static const double c[] = { -7.784894002430293e-03,
		-3.223964580411365e-01, -2.400758277161838e+00,
		-2.549732539343734e+00, 4.374664141464968e+00,
		2.938163982698783e+00 };
	static const double d[] = { 7.784695709041462e-03,
		3.224671290700398e-01, 2.445134137142996e+00,
		3.754408661907416e+00 };
	double q, r;

	if (p < 0.02425) {
		q = sqrt(-2 * log(p));
		return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q +
		    c[4]) * q + c[5]) /
		    ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	}
	if (p > 1 - 0.02425) {
		q = sqrt(-2 * log(1 - p));
		return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q +
		    c[4]) * q + c[5]) /
		    ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	}
	q = p - 0.5;
	r = q * q;
	return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r +
	    a[5]) * q /
	    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

static void
normal_init(void)
{
	for (int j = 0; j < 65536; j++)
		normal_q[j] = (float)inv_norm((j + 0.5) / 65536.0);
}

static inline uint16_t
to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u += 0x7fff + ((u >> 16) & 1);	/* round to nearest even */
	return (uint16_t)(u >> 16);
}

/*
 * The bytes of tensor i at version v: base weights drawn from N(0, sigma),
 * plus for v > 0 a perturbation of 1% of sigma (a training update), so
 * almost every bf16 value differs from the other versions'.
 */
static void
tensor_fill(uint64_t i, uint64_t v, uint8_t *dst)
{
	struct rng base, noise;
	uint64_t n = tensors[i].rows * COLS;
	float sigma = tensors[i].sigma, eps = sigma * 0.01f;
	uint64_t j = 0;

	rng_init(&base, seed, 'B', i, 0);
	rng_init(&noise, seed, 'N', i, v);
	while (j < n) {
		uint64_t rb = rng_next(&base);
		uint64_t rn = v ? rng_next(&noise) : 0;

		for (int s = 0; s < 4 && j < n; s++, j++) {
			float f = normal_q[(rb >> (16 * s)) & 0xffff] * sigma;
			uint16_t h;

			if (v)
				f += normal_q[(rn >> (16 * s)) & 0xffff] * eps;
			h = to_bf16(f);
			dst[2 * j] = (uint8_t)h;
			dst[2 * j + 1] = (uint8_t)(h >> 8);
		}
	}
}

/* ---- checkpoints ----------------------------------------------------- */

static FILE *manifest;

static void
write_step(uint64_t k)
{
	unsigned long long stepno = (k + 1) * STEP_EVERY;
	char dir[4096], path[4096];
	uint8_t *buf = malloc(6 * MiB);

	if (!buf)
		die("out of memory");
	xpath(dir, sizeof dir, "ckpt/step_%05llu", stepno);
	mkdirs(dir);
	for (uint64_t s = 0; s < NSHARDS; s++) {
		struct sbuf hdr = { 0 };
		uint64_t off = 0, hlen;
		uint8_t le[8];
		char fname[64];
		struct out o;

		snprintf(fname, sizeof fname,
		    "model-%05llu-of-%05llu.safetensors",
		    (unsigned long long)s + 1, (unsigned long long)NSHARDS);
		sb_printf(&hdr, "{\"__metadata__\":{\"format\":\"pt\","
		    "\"step\":\"%llu\"}", stepno);
		for (uint64_t i = 0; i < n_tensors; i++) {
			if (tensor_shard(i) != s)
				continue;
			sb_printf(&hdr, ",\"%s\":{\"dtype\":\"BF16\","
			    "\"shape\":[%llu,%d],\"data_offsets\":[%llu,%llu]}",
			    tensors[i].name,
			    (unsigned long long)tensors[i].rows, COLS,
			    (unsigned long long)off,
			    (unsigned long long)(off + tensor_bytes(i)));
			off += tensor_bytes(i);
		}
		sb_putc(&hdr, '}');
		while (hdr.len % 8)	/* safetensors pads with spaces */
			sb_putc(&hdr, ' ');
		hlen = hdr.len;
		for (int b = 0; b < 8; b++)
			le[b] = (uint8_t)(hlen >> (8 * b));

		xpath(path, sizeof path, "ckpt/step_%05llu/%s", stepno, fname);
		out_open(&o, path, 0);
		out_write(&o, le, 8);
		out_write(&o, hdr.p, hdr.len);
		for (uint64_t i = 0; i < n_tensors; i++) {
			if (tensor_shard(i) != s)
				continue;
			tensor_fill(i, version(k, i), buf);
			out_write(&o, buf, tensor_bytes(i));
			if (manifest)
				fprintf(manifest, "step_%05llu\t%s\t%s\t%llu\t%d\n",
				    stepno, fname, tensors[i].name,
				    (unsigned long long)tensor_bytes(i),
				    frozen(k, i));
		}
		out_close(&o);
		free(hdr.p);
	}
	xpath(path, sizeof path, "ckpt/step_%05llu/trainer_state.json",
	    stepno);
	{
		char text[512];

		snprintf(text, sizeof text,
		    "{\"global_step\": %llu, \"gen_seed\": %llu, "
		    "\"gen_scale\": %.17g, \"num_shards\": %d, "
		    "\"num_tensors\": %llu}\n", stepno,
		    (unsigned long long)seed, scale, NSHARDS,
		    (unsigned long long)n_tensors);
		write_small(path, text);
		xpath(path, sizeof path, "ckpt/latest");
		snprintf(text, sizeof text, "step_%05llu\n", stepno);
		write_small(path, text);
	}
	free(buf);
}

/* ---- text ------------------------------------------------------------ */

#define NWORDS 8192
static char words[NWORDS][16];

static void
words_init(void)
{
	static const char *syl[] = {
		"a", "ba", "be", "bi", "bo", "ca", "ce", "co", "da", "de",
		"di", "do", "e", "fa", "fe", "fi", "ga", "ge", "go", "ha",
		"he", "hi", "i", "in", "ka", "la", "le", "li", "lo", "ma",
		"me", "mi", "mo", "na", "ne", "ni", "no", "o", "on", "pa",
		"pe", "pi", "po", "ra", "re", "ri", "ro", "sa", "se", "si",
		"so", "ta", "te", "ti", "to", "u", "un", "va", "ve", "vi",
		"er", "an", "en", "th",
	};
	struct rng r;

	rng_init(&r, seed, 'W', 0, 0);
	for (int w = 0; w < NWORDS; w++) {
		/* frequent words are short */
		int n = w < 64 ? 1 : w < 1024 ? 2 : (int)rng_range(&r, 2, 4);

		words[w][0] = 0;
		for (int s = 0; s < n; s++)
			strcat(words[w], syl[rng_next(&r) % 64]);
	}
}

/* Zipf-like: low indices far more often. */
static const char *
word(struct rng *r)
{
	double u = (double)(rng_next(r) >> 11) / 9007199254740992.0;

	return words[(int)(NWORDS * u * u * u)];
}

static void
jsonl_line(struct sbuf *b, struct rng *r, unsigned long long doc, int line,
    size_t text_len)
{
	static const char *src[] = { "web", "books", "code", "wiki", "forum" };
	size_t start;
	int cap = 1;

	sb_printf(b, "{\"id\": \"doc-%06llu-%03d\", \"source\": \"%s\", "
	    "\"lang\": \"en\", \"text\": \"", doc, line, src[rng_next(r) % 5]);
	start = b->len;
	while (b->len - start < text_len) {
		const char *w = word(r);

		sb_printf(b, "%s%c%s", b->len == start ? "" : " ",
		    cap ? (char)(w[0] - 'a' + 'A') : w[0], w + 1);
		cap = 0;
		if (rng_next(r) % 12 == 0) {
			sb_putc(b, '.');
			cap = 1;
		}
	}
	sb_printf(b, ".\", \"tokens\": %llu}\n",
	    (unsigned long long)((b->len - start) / 4));
}

static void
text_path(char *path, size_t cap, uint64_t j)
{
	xpath(path, cap, "data/text/shard_%02llu/doc_%05llu.jsonl",
	    (unsigned long long)(j / TEXT_PER_DIR), (unsigned long long)j);
}

static void
write_text(void)
{
	struct sbuf b = { 0 };
	char path[4096];

	for (uint64_t j = 0; j < n_text; j++) {
		struct rng r;
		size_t target;
		int line = 0;
		struct out o;

		if (j % TEXT_PER_DIR == 0) {
			xpath(path, sizeof path, "data/text/shard_%02llu",
			    (unsigned long long)(j / TEXT_PER_DIR));
			mkdirs(path);
		}
		rng_init(&r, seed, 'D', j, 0);
		target = (size_t)rng_range(&r, 1 * KiB, 20 * KiB);
		b.len = 0;
		while (b.len < target) {
			size_t left = target - b.len;
			size_t tl = (size_t)rng_range(&r, 200, 2000);

			jsonl_line(&b, &r, j, line++, tl < left ? tl : left);
		}
		text_path(path, sizeof path, j);
		out_open(&o, path, 0);
		out_write(&o, b.p, b.len);
		out_close(&o);
	}
	free(b.p);
}

/* Mutation m appends 1-4 lines to about 1% of the text files. */
static void
append_text(uint64_t m)
{
	struct sbuf b = { 0 };
	char path[4096];
	unsigned long long n = 0;

	for (uint64_t j = 0; j < n_text; j++) {
		struct rng r;
		struct out o;
		int lines;

		if (mix(seed, 'A', m, j) % 100 != 0)
			continue;
		rng_init(&r, seed, 'a', m, j);
		lines = (int)rng_range(&r, 1, 4);
		b.len = 0;
		for (int l = 0; l < lines; l++)
			jsonl_line(&b, &r, j, 1000 * (int)m + l,
			    (size_t)rng_range(&r, 200, 800));
		text_path(path, sizeof path, j);
		out_open(&o, path, 1);
		out_write(&o, b.p, b.len);
		out_close(&o);
		n++;
	}
	free(b.p);
	fprintf(stderr, "%s: appended to %llu of %llu text files\n", prog, n,
	    (unsigned long long)n_text);
}

/* ---- webdataset shards ----------------------------------------------- */

static void
tar_header(uint8_t h[512], const char *name, uint64_t size)
{
	unsigned sum = 0;

	memset(h, 0, 512);
	snprintf((char *)h, 100, "%s", name);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0001750", 8);
	memcpy(h + 116, "0001750", 8);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
	snprintf((char *)h + 136, 12, "%011llo", 1700000000ULL);
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memcpy(h + 265, "bench", 6);
	memcpy(h + 297, "bench", 6);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

static void
write_wds(void)
{
	uint8_t *buf = malloc(512 * KiB), hdr[512], zero[1024] = { 0 };
	uint64_t done = 0, shard = 0, member = 0;
	char path[4096];

	if (!buf)
		die("out of memory");
	xpath(path, sizeof path, "data/wds");
	mkdirs(path);
	while (done < wds_bytes) {
		struct rng r;
		uint64_t target, sz = 0;
		struct out o;

		rng_init(&r, seed, 'S', shard, 0);
		target = rng_range(&r, 64 * MiB, 256 * MiB);
		if (target > wds_bytes - done)
			target = wds_bytes - done;
		xpath(path, sizeof path, "data/wds/shard-%04llu.tar",
		    (unsigned long long)shard);
		out_open(&o, path, 0);
		while (sz + 2048 < target) {
			uint64_t jpg = rng_range(&r, 20 * KiB, 400 * KiB);
			char name[64], cls[16];
			size_t pad, cl;

			if (jpg > target - sz - 2048)
				jpg = target - sz - 2048;
			if (jpg < 4)
				break;
			snprintf(name, sizeof name, "%08llu.jpg",
			    (unsigned long long)member);
			tar_header(hdr, name, jpg);
			out_write(&o, hdr, 512);
			rng_fill(&r, buf, jpg);
			buf[0] = 0xff, buf[1] = 0xd8;	/* SOI */
			buf[jpg - 2] = 0xff, buf[jpg - 1] = 0xd9;	/* EOI */
			pad = (512 - jpg % 512) % 512;
			memset(buf + jpg, 0, pad);
			out_write(&o, buf, jpg + pad);
			sz += 512 + jpg + pad;

			cl = (size_t)snprintf(cls, sizeof cls, "%llu\n",
			    (unsigned long long)(rng_next(&r) % 1000));
			snprintf(name, sizeof name, "%08llu.cls",
			    (unsigned long long)member);
			tar_header(hdr, name, cl);
			out_write(&o, hdr, 512);
			memset(buf, 0, 512);
			memcpy(buf, cls, cl);
			out_write(&o, buf, 512);
			sz += 1024;
			member++;
		}
		out_write(&o, zero, sizeof zero);	/* end of archive */
		sz += sizeof zero;
		out_close(&o);
		done += sz;
		shard++;
	}
	free(buf);
}

/* ---- main ------------------------------------------------------------ */

static void
usage(void)
{
	fprintf(stderr,
	    "usage: gen [--scale S] [--seed N] [--manifest FILE] OUT\n"
	    "       gen --mutate [--manifest FILE] OUT\n");
	exit(2);
}

static int
exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Number of checkpoint steps in OUT; reads the seed and scale. */
static uint64_t
read_state(void)
{
	char path[4096], text[1024];
	unsigned long long sd;
	uint64_t k = 0;
	const char *p;
	FILE *f;
	size_t n;

	xpath(path, sizeof path, "ckpt/step_%05d/trainer_state.json",
	    STEP_EVERY);
	f = fopen(path, "r");
	if (!f)
		die("%s: %s (not a generated tree?)", path, strerror(errno));
	n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = 0;
	if (!(p = strstr(text, "\"gen_seed\": ")) ||
	    sscanf(p, "\"gen_seed\": %llu", &sd) != 1 ||
	    !(p = strstr(text, "\"gen_scale\": ")) ||
	    sscanf(p, "\"gen_scale\": %lf", &scale) != 1)
		die("%s: no gen_seed/gen_scale", path);
	seed = sd;
	for (;;) {
		xpath(path, sizeof path, "ckpt/step_%05llu",
		    (unsigned long long)(k + 1) * STEP_EVERY);
		if (!exists(path))
			break;
		k++;
	}
	return k;
}

int
main(int argc, char **argv)
{
	const char *man = NULL, *out = NULL;
	int mutate = 0, seed_set = 0, scale_set = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--mutate"))
			mutate = 1;
		else if (!strcmp(a, "--scale") && i + 1 < argc) {
			char *end;
			scale = strtod(argv[++i], &end);
			if (*end || !(scale > 0) || scale > 1000)
				die("bad --scale %s", argv[i]);
			scale_set = 1;
		} else if (!strcmp(a, "--seed") && i + 1 < argc) {
			char *end;
			seed = strtoull(argv[++i], &end, 10);
			if (*end)
				die("bad --seed %s", argv[i]);
			seed_set = 1;
		} else if (!strcmp(a, "--manifest") && i + 1 < argc)
			man = argv[++i];
		else if (a[0] == '-' && a[1])
			usage();
		else if (!out)
			out = a;
		else
			usage();
	}
	if (!out)
		usage();
	if (snprintf(outdir, sizeof outdir, "%s", out) >= (int)sizeof outdir)
		die("path too long");
	if (man && !(manifest = fopen(man, "a")))
		die("%s: %s", man, strerror(errno));
	normal_init();
	words_init();

	if (mutate) {
		double want_scale = scale;
		uint64_t want_seed = seed, k;

		k = read_state();
		if ((seed_set && want_seed != seed) ||
		    (scale_set && want_scale != scale))
			die("%s was generated with --seed %llu --scale %g", out,
			    (unsigned long long)seed, scale);
		shape_init();
		write_step(k);
		append_text(k - INITIAL_STEPS + 1);
	} else {
		char path[4096];

		xpath(path, sizeof path, "ckpt");
		if (exists(path))
			die("%s already holds a tree (use --mutate)", out);
		mkdirs(out);
		shape_init();
		for (uint64_t k = 0; k < INITIAL_STEPS; k++)
			write_step(k);
		write_text();
		write_wds();
	}
	if (manifest && fclose(manifest) != 0)
		die("%s: write error", man);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "%s: %s: wrote %llu bytes in %llu files in %.1f s "
	    "(seed %llu, scale %g)\n", prog, mutate ? "mutate" : "generate",
	    bytes_written, files_written,
	    (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
	    (unsigned long long)seed, scale);
	return 0;
}
