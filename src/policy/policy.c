/*
 * Policy files (coffer-policy(5)): INI, split into sections and
 * key = value pairs by libinih, checked here.  libinih reports only the
 * first malformed line and passes no line numbers to its handler (Debian
 * builds it without INI_HANDLER_LINENO), so the lines come through a
 * reader of our own: it counts them, reads section headers itself (so an
 * empty section is seen too) and reports each malformed line, and every
 * message names its line.  Nothing is decided until the whole file was
 * read: a policy with any error runs nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/policy.h"
#include "coffer/storage.h"

/* Longer lines are refused (reported), as are larger files: neither is
 * ever read whole (coffer-policy(5)). */
#define LINE_MAX_BYTES 4096
#define POLICY_MAX_BYTES (1024 * 1024)
#define NAME_MAX_BYTES 64

enum section {
	SEC_NONE,		/* before the first section */
	SEC_BAD,		/* unknown or malformed: its keys are ignored */
	SEC_REPOSITORY,
	SEC_RETENTION,
	SEC_MONITORING,
	SEC_DATASET,
	SEC_EXPORT,
	SEC_DRILL,
	SEC_VERIFY
};

static const struct {
	const char *name;
	enum section sec;
	int named;		/* [dataset NAME] */
} sections[] = {
	{ "repository", SEC_REPOSITORY, 0 },
	{ "retention", SEC_RETENTION, 0 },
	{ "monitoring", SEC_MONITORING, 0 },
	{ "dataset", SEC_DATASET, 1 },
	{ "export", SEC_EXPORT, 1 },
	{ "drill", SEC_DRILL, 1 },
	{ "verify", SEC_VERIFY, 1 },
};
#define NSECTIONS (sizeof(sections) / sizeof(sections[0]))

/* Keys: which sections take them, whether they may repeat. */
enum key {
	K_PATH, K_KEY_FILE, K_PASSPHRASE_FILE, K_CATALOG,
	K_METRICS_FILE,
	K_KEEP_LAST, K_KEEP_HOURLY, K_KEEP_DAILY, K_KEEP_WEEKLY,
	K_KEEP_MONTHLY, K_KEEP_YEARLY, K_KEEP_WITHIN,
	K_SCHEDULE, K_PRUNE, K_MAX_UNUSED,
	K_EXCLUDE, K_ONE_FILE_SYSTEM, K_FULL, K_DIFFERENTIAL, K_INCREMENTAL,
	K_SETTLE, K_REQUIRE, K_CHECKPOINTS,
	K_TO, K_DATASETS,
	K_SAMPLE, K_RTO, K_RPO, K_NO_WRITE, K_FROM,
	K_READ_DATA, K_MAX_DURATION,
	K__COUNT
};

#define IN(s) (1u << (s))
#define KEEP_SECS (IN(SEC_RETENTION) | IN(SEC_DATASET))
#define LEVEL_SECS (IN(SEC_DATASET) | IN(SEC_EXPORT))

static const struct {
	const char *name;
	unsigned in;		/* IN(section) */
	int repeat;
} keys[K__COUNT] = {
	[K_PATH] = { "path", IN(SEC_REPOSITORY) | IN(SEC_DATASET), 0 },
	[K_KEY_FILE] = { "key-file", IN(SEC_REPOSITORY), 0 },
	[K_PASSPHRASE_FILE] = { "passphrase-file", IN(SEC_REPOSITORY), 0 },
	[K_CATALOG] = { "catalog", IN(SEC_REPOSITORY), 0 },
	[K_METRICS_FILE] = { "metrics-file", IN(SEC_MONITORING), 0 },
	[K_KEEP_LAST] = { "keep-last", KEEP_SECS, 0 },
	[K_KEEP_HOURLY] = { "keep-hourly", KEEP_SECS, 0 },
	[K_KEEP_DAILY] = { "keep-daily", KEEP_SECS, 0 },
	[K_KEEP_WEEKLY] = { "keep-weekly", KEEP_SECS, 0 },
	[K_KEEP_MONTHLY] = { "keep-monthly", KEEP_SECS, 0 },
	[K_KEEP_YEARLY] = { "keep-yearly", KEEP_SECS, 0 },
	[K_KEEP_WITHIN] = { "keep-within", KEEP_SECS, 0 },
	[K_SCHEDULE] = { "schedule", IN(SEC_RETENTION) | IN(SEC_DRILL) |
	    IN(SEC_VERIFY), 0 },
	[K_PRUNE] = { "prune", IN(SEC_RETENTION), 0 },
	[K_MAX_UNUSED] = { "max-unused", IN(SEC_RETENTION), 0 },
	[K_EXCLUDE] = { "exclude", IN(SEC_DATASET), 1 },
	[K_ONE_FILE_SYSTEM] = { "one-file-system", IN(SEC_DATASET), 0 },
	[K_FULL] = { "full", LEVEL_SECS, 0 },
	[K_DIFFERENTIAL] = { "differential", LEVEL_SECS, 0 },
	[K_INCREMENTAL] = { "incremental", LEVEL_SECS, 0 },
	[K_SETTLE] = { "settle", IN(SEC_DATASET), 0 },
	[K_REQUIRE] = { "require", IN(SEC_DATASET), 0 },
	[K_CHECKPOINTS] = { "checkpoints", IN(SEC_DATASET), 1 },
	[K_TO] = { "to", IN(SEC_EXPORT), 0 },
	[K_DATASETS] = { "datasets", IN(SEC_RETENTION) | IN(SEC_EXPORT) |
	    IN(SEC_DRILL), 1 },
	[K_SAMPLE] = { "sample", IN(SEC_DRILL), 0 },
	[K_RTO] = { "rto", IN(SEC_DRILL), 0 },
	[K_RPO] = { "rpo", IN(SEC_DRILL), 0 },
	[K_NO_WRITE] = { "no-write", IN(SEC_DRILL), 0 },
	[K_FROM] = { "from", IN(SEC_DRILL), 0 },
	[K_READ_DATA] = { "read-data", IN(SEC_VERIFY), 0 },
	[K_MAX_DURATION] = { "max-duration", IN(SEC_VERIFY), 0 },
};

/* Where a name list was given, to report names it does not define. */
struct ref {
	char **names;
	size_t n;
	int line;
};

/* A problem, reported once the whole file was read, in line order. */
struct problem {
	int line;
	int seq;
	char msg[512];
};

struct loader {
	struct policy *p;
	struct problem *problems;
	size_t nproblems;
	const char *file;
	FILE *f;
	char *buf;		/* a line: LINE_MAX_BYTES and a NUL */
	size_t bytes;		/* read so far */
	int too_big;		/* more than POLICY_MAX_BYTES */
	int line;		/* of the line being read */
	int errors;
	int oom;
	enum section sec;
	int sec_line;
	uint64_t seen;		/* keys given in this section (K_*) */
	int seen_repository, seen_retention, seen_monitoring;
	int keep_line;		/* the first retention rule's */
};

static void __attribute__((format(printf, 3, 4)))
error_at(struct loader *l, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	struct problem *p;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l->errors++;
	if ((p = reallocarray(l->problems, l->nproblems + 1,
	    sizeof(*p))) == NULL) {
		log_error("%s:%d: %s", l->file, line, msg);
		return;
	}
	l->problems = p;
	p = &p[l->nproblems];
	p->line = line;
	p->seq = (int)l->nproblems++;
	snprintf(p->msg, sizeof(p->msg), "%s", msg);
}

static int
by_line(const void *a, const void *b)
{
	const struct problem *x = a, *y = b;

	if (x->line != y->line)
		return (x->line < y->line ? -1 : 1);
	return (x->seq < y->seq ? -1 : x->seq > y->seq);
}

/* Every problem, as FILE:LINE: message, in line order. */
static void
report(struct loader *l)
{
	size_t i;

	if (l->nproblems > 0)
		qsort(l->problems, l->nproblems, sizeof(*l->problems),
		    by_line);
	for (i = 0; i < l->nproblems; i++)
		if (l->problems[i].line > 0)
			log_error("%s:%d: %s", l->file, l->problems[i].line,
			    l->problems[i].msg);
		else
			log_error("%s: %s", l->file, l->problems[i].msg);
	free(l->problems);
	l->problems = NULL;
	l->nproblems = 0;
}

static char *
dup_str(struct loader *l, const char *s)
{
	char *d = strdup(s);

	if (d == NULL) {
		log_error("out of memory");
		l->oom = 1;
		l->errors++;
	}
	return (d);
}

static int
push_str(struct loader *l, char ***v, size_t *n, const char *s)
{
	char **p, *d;

	if ((d = dup_str(l, s)) == NULL)
		return (-1);
	if ((p = reallocarray(*v, *n + 1, sizeof(*p))) == NULL) {
		free(d);
		log_error("out of memory");
		l->oom = 1;
		l->errors++;
		return (-1);
	}
	p[(*n)++] = d;
	*v = p;
	return (0);
}

/* Grow one of the arrays of named sections by one zeroed element. */
static void *
grow(struct loader *l, void *v, size_t n, size_t size)
{
	char *p;

	if ((p = reallocarray(v, n + 1, size)) == NULL) {
		log_error("out of memory");
		l->oom = 1;
		l->errors++;
		return (NULL);
	}
	memset(p + n * size, 0, size);
	return (p);
}

static void
begin_section(struct loader *l, char *text)
{
	char *kind = text, *name;
	size_t i, n;
	void *v;

	l->sec = SEC_BAD;
	l->sec_line = l->line;
	l->seen = 0;
	name = kind + strcspn(kind, " \t");
	if (*name != '\0')
		*name++ = '\0';
	name += strspn(name, " \t");
	n = strlen(name);
	while (n > 0 && (name[n - 1] == ' ' || name[n - 1] == '\t'))
		name[--n] = '\0';
	/* git's [remote "origin"] style is taken too. */
	if (n >= 2 && name[0] == '"' && name[n - 1] == '"') {
		name[n - 1] = '\0';
		name++;
	}
	for (i = 0; i < NSECTIONS; i++)
		if (strcasecmp(kind, sections[i].name) == 0)
			break;
	if (i == NSECTIONS) {
		error_at(l, l->line, "unknown section '[%s%s%s]' (repository, "
		    "retention, monitoring, dataset NAME, export TARGET, "
		    "drill NAME, verify NAME)", kind, *name ? " " : "", name);
		return;
	}
	if (sections[i].named && *name == '\0') {
		error_at(l, l->line, "section '[%s]' needs a name: [%s NAME]",
		    kind, sections[i].name);
		return;
	}
	if (!sections[i].named && *name != '\0') {
		error_at(l, l->line, "section '[%s]' takes no name", kind);
		return;
	}
	if (sections[i].named && !name_ok(name, NAME_MAX_BYTES)) {
		error_at(l, l->line, "bad name '%s' (letters, digits, '.', "
		    "'_', '-'; at most %d)", name, NAME_MAX_BYTES);
		return;
	}
	switch (sections[i].sec) {
	case SEC_REPOSITORY:
	case SEC_RETENTION:
	case SEC_MONITORING: {
		int *seen = sections[i].sec == SEC_REPOSITORY ?
		    &l->seen_repository : sections[i].sec == SEC_RETENTION ?
		    &l->seen_retention : &l->seen_monitoring;

		if (*seen) {
			error_at(l, l->line, "section '[%s]' given twice "
			    "(first at line %d)", sections[i].name, *seen);
			return;
		}
		*seen = l->line;
		if (sections[i].sec == SEC_RETENTION)
			l->p->retention_line = l->line;
		break;
	}
	case SEC_DATASET:
		for (n = 0; n < l->p->ndatasets; n++)
			if (strcmp(l->p->datasets[n].name, name) == 0) {
				error_at(l, l->line, "dataset '%s' defined "
				    "twice (first at line %d)", name,
				    l->p->datasets[n].line);
				return;
			}
		v = grow(l, l->p->datasets, l->p->ndatasets,
		    sizeof(*l->p->datasets));
		if (v == NULL)
			return;
		l->p->datasets = v;
		if ((l->p->datasets[l->p->ndatasets].name = dup_str(l, name)) ==
		    NULL)
			return;
		l->p->datasets[l->p->ndatasets].line = l->line;
		l->p->ndatasets++;
		break;
	case SEC_EXPORT:
		for (n = 0; n < l->p->nexports; n++)
			if (strcmp(l->p->exports[n].target, name) == 0) {
				error_at(l, l->line, "export target '%s' "
				    "defined twice (first at line %d)", name,
				    l->p->exports[n].line);
				return;
			}
		v = grow(l, l->p->exports, l->p->nexports,
		    sizeof(*l->p->exports));
		if (v == NULL)
			return;
		l->p->exports = v;
		if ((l->p->exports[l->p->nexports].target = dup_str(l,
		    name)) == NULL)
			return;
		l->p->exports[l->p->nexports].line = l->line;
		l->p->nexports++;
		break;
	case SEC_DRILL:
		for (n = 0; n < l->p->ndrills; n++)
			if (strcmp(l->p->drills[n].name, name) == 0) {
				error_at(l, l->line, "drill '%s' defined twice "
				    "(first at line %d)", name,
				    l->p->drills[n].line);
				return;
			}
		v = grow(l, l->p->drills, l->p->ndrills,
		    sizeof(*l->p->drills));
		if (v == NULL)
			return;
		l->p->drills = v;
		if ((l->p->drills[l->p->ndrills].name = dup_str(l, name)) ==
		    NULL)
			return;
		l->p->drills[l->p->ndrills].line = l->line;
		l->p->ndrills++;
		break;
	case SEC_VERIFY:
		for (n = 0; n < l->p->nverifies; n++)
			if (strcmp(l->p->verifies[n].name, name) == 0) {
				error_at(l, l->line, "verify '%s' defined twice "
				    "(first at line %d)", name,
				    l->p->verifies[n].line);
				return;
			}
		v = grow(l, l->p->verifies, l->p->nverifies,
		    sizeof(*l->p->verifies));
		if (v == NULL)
			return;
		l->p->verifies = v;
		if ((l->p->verifies[l->p->nverifies].name = dup_str(l,
		    name)) == NULL)
			return;
		l->p->verifies[l->p->nverifies].line = l->line;
		l->p->nverifies++;
		break;
	default:
		break;
	}
	l->sec = sections[i].sec;
}

/*
 * The next line into l->buf, without its newline: its length, or -1 at
 * the end of the file (or past POLICY_MAX_BYTES: too_big).  Of a line
 * longer than LINE_MAX_BYTES, the rest is skipped (*lost set).
 */
static ssize_t
get_line(struct loader *l, int *lost)
{
	size_t n = 0;
	int c, any = 0;

	*lost = 0;
	while ((c = getc(l->f)) != EOF) {
		any = 1;
		if (++l->bytes > POLICY_MAX_BYTES) {
			l->too_big = 1;
			return (-1);
		}
		if (c == '\n')
			break;
		if (n < LINE_MAX_BYTES)
			l->buf[n++] = (char)c;
		else
			*lost = 1;
	}
	if (!any)
		return (-1);
	l->buf[n] = '\0';
	return ((ssize_t)n);
}

/*
 * libinih's reader: one line of the file into str (num bytes), counted.
 * Section headers are taken here; a line that is too long or neither a
 * header, a comment nor key = value is reported and handed on blank.
 */
static char *
read_line(char *str, int num, void *stream)
{
	struct loader *l = stream;
	ssize_t n;
	int lost;
	char *s, *end;

	if ((n = get_line(l, &lost)) < 0)
		return (NULL);
	l->line++;
	while (n > 0 && l->buf[n - 1] == '\r')
		l->buf[--n] = '\0';
	snprintf(str, (size_t)num, "\n");
	if (lost || (size_t)n + 2 >= (size_t)num || n >= LINE_MAX_BYTES) {
		error_at(l, l->line, "line too long (more than %d bytes)",
		    LINE_MAX_BYTES - 2);
		return (str);
	}
	if (memchr(l->buf, '\0', (size_t)n) != NULL) {
		error_at(l, l->line, "NUL byte in the line");
		return (str);
	}
	s = l->buf + strspn(l->buf, " \t");
	if (*s == '\0' || *s == ';' || *s == '#')
		return (str);
	if (*s == '[') {
		if ((end = strchr(s, ']')) == NULL) {
			error_at(l, l->line, "section header without ']'");
			l->sec = SEC_BAD;
			return (str);
		}
		*end = '\0';
		end++;
		end += strspn(end, " \t");
		if (*end != '\0' && *end != ';' && *end != '#') {
			error_at(l, l->line, "text after the section header");
			l->sec = SEC_BAD;
			return (str);
		}
		s++;
		s += strspn(s, " \t");
		begin_section(l, s);
		return (str);
	}
	if (strchr(s, '=') == NULL) {
		error_at(l, l->line, "expected 'key = value' or '[section]', "
		    "not '%.40s'", s);
		return (str);
	}
	/* A key's value may hold ':' ("daily 02:00"): the key ends at the
	 * first '=' only, so libinih must not split at a ':' before it. */
	if (strcspn(s, ":") < strcspn(s, "=")) {
		error_at(l, l->line, "expected 'key = value', not '%.40s'", s);
		return (str);
	}
	snprintf(str, (size_t)num, "%s\n", s);
	return (str);
}

static int
parse_bool(const char *v, int *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };
	size_t i;

	for (i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = 1;
			return (0);
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = 0;
			return (0);
		}
	}
	return (-1);
}

static int
parse_count(const char *v, int *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end != '\0' || n < 1 || n > 1000000)
		return (-1);
	*out = (int)n;
	return (0);
}

/* A percentage: (0, 100], or [0, 100] with zero. */
int
policy_parse_percent(const char *v, int zero, double *out)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (errno || end == v || (*end != '\0' && strcmp(end, "%") != 0) ||
	    !(zero ? d >= 0 : d > 0) || d > 100)
		return (-1);
	*out = d;
	return (0);
}

static int
absolute(struct loader *l, const char *key, const char *v)
{
	if (v[0] == '/')
		return (0);
	error_at(l, l->line, "%s '%s' is not an absolute path", key, v);
	return (-1);
}

/* Words separated by blanks, each a name, into a list. */
static void
push_names(struct loader *l, const char *what, char ***v, size_t *n,
    const char *value)
{
	char copy[LINE_MAX_BYTES], *w, *save = NULL;

	snprintf(copy, sizeof(copy), "%s", value);
	for (w = strtok_r(copy, " \t,", &save); w != NULL;
	    w = strtok_r(NULL, " \t,", &save)) {
		if (!name_ok(w, NAME_MAX_BYTES)) {
			error_at(l, l->line, "bad %s name '%s'", what, w);
			continue;
		}
		if (push_str(l, v, n, w))
			return;
	}
}

static void
set_keep(struct loader *l, struct retention *r, enum key k, const char *v)
{
	int *count = NULL;

	switch (k) {
	case K_KEEP_LAST: count = &r->last; break;
	case K_KEEP_HOURLY: count = &r->hourly; break;
	case K_KEEP_DAILY: count = &r->daily; break;
	case K_KEEP_WEEKLY: count = &r->weekly; break;
	case K_KEEP_MONTHLY: count = &r->monthly; break;
	case K_KEEP_YEARLY: count = &r->yearly; break;
	default: break;
	}
	if (l->keep_line == 0)
		l->keep_line = l->line;
	if (l->sec == SEC_DATASET &&
	    l->p->datasets[l->p->ndatasets - 1].keep_line == 0)
		l->p->datasets[l->p->ndatasets - 1].keep_line = l->line;
	if (count != NULL) {
		if (parse_count(v, count))
			error_at(l, l->line, "%s needs a count from 1 to "
			    "1000000, not '%s'", keys[k].name, v);
		return;
	}
	if (policy_parse_duration(v, &r->within))
		error_at(l, l->line, "keep-within needs a duration such as "
		    "2d or 36h, not '%s'", v);
}

static void
set_schedule(struct loader *l, struct schedule *s, const char *key,
    const char *v)
{
	const char *why;

	if (schedule_parse(v, s, &why))
		error_at(l, l->line, "%s: bad schedule '%s': %s", key, v, why);
}

static void
set_duration(struct loader *l, double *out, const char *key, const char *v)
{
	if (policy_parse_duration(v, out))
		error_at(l, l->line, "%s needs a duration such as 90s, 10m, 2h "
		    "or 1h30m, not '%s'", key, v);
}

static void
set_path(struct loader *l, char **out, const char *key, const char *v)
{
	if (absolute(l, key, v) == 0)
		*out = dup_str(l, v);
}

/* A dataset's root: an absolute path to a directory, now. */
static void
set_dataset_path(struct loader *l, struct policy_dataset *d, const char *v)
{
	struct stat st;

	if (absolute(l, "path", v))
		return;
	if (stat(v, &st) != 0)
		error_at(l, l->line, "dataset '%s': cannot use path '%s': %s",
		    d->name, v, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		error_at(l, l->line, "dataset '%s': path '%s' is not a "
		    "directory", d->name, v);
	d->path = dup_str(l, v);
}

/*
 * [verify]'s read-data: no (indexes and records only), all, P% (a random
 * share), or 1/M: a different M-th of the packs each run, in turn, so
 * that M runs read them all.
 */
static void
set_read_data(struct loader *l, struct policy_verify *vf, const char *v)
{
	char *end;
	long m;
	int b;

	if (parse_bool(v, &b) == 0 && b == 0) {
		vf->read = POLICY_READ_NONE;
		return;
	}
	if (strcasecmp(v, "all") == 0 || (parse_bool(v, &b) == 0 && b)) {
		vf->read = POLICY_READ_ALL;
		return;
	}
	if (strncmp(v, "1/", 2) == 0) {
		errno = 0;
		m = strtol(v + 2, &end, 10);
		if (errno == 0 && end != v + 2 && *end == '\0' && m >= 1 &&
		    m <= 1000000 && v[2] >= '0' && v[2] <= '9') {
			vf->read = POLICY_READ_SLICE;
			vf->slices = (unsigned)m;
			return;
		}
	} else if (strchr(v, '%') != NULL &&
	    policy_parse_percent(v, 0, &vf->percent) == 0) {
		vf->read = vf->percent >= 100 ? POLICY_READ_ALL :
		    POLICY_READ_PERCENT;
		return;
	}
	error_at(l, l->line, "read-data is no, all, P%% or 1/M (a different "
	    "M-th of the packs each run, in turn), not '%s'", v);
}

/* libinih's handler: one key = value of the current section. */
static int
handle(void *user, const char *section, const char *name, const char *v)
{
	struct loader *l = user;
	struct policy *p = l->p;
	struct policy_dataset *d = NULL;
	struct policy_export *e = NULL;
	struct policy_drill *dr = NULL;
	struct policy_verify *vf = NULL;
	size_t k;
	int b;

	(void)section;
	if (l->sec == SEC_BAD)
		return (1);
	if (l->sec == SEC_NONE) {
		error_at(l, l->line, "'%s' before the first section", name);
		return (1);
	}
	for (k = 0; k < K__COUNT; k++)
		if (strcmp(name, keys[k].name) == 0)
			break;
	if (k == K__COUNT || !(keys[k].in & IN(l->sec))) {
		error_at(l, l->line, "unknown key '%s' in this section", name);
		return (1);
	}
	if (*v == '\0') {
		error_at(l, l->line, "'%s' needs a value", name);
		return (1);
	}
	if (!keys[k].repeat && (l->seen & ((uint64_t)1 << k))) {
		error_at(l, l->line, "'%s' given twice in this section", name);
		return (1);
	}
	l->seen |= (uint64_t)1 << k;
	if (l->sec == SEC_DATASET)
		d = &p->datasets[p->ndatasets - 1];
	else if (l->sec == SEC_EXPORT)
		e = &p->exports[p->nexports - 1];
	else if (l->sec == SEC_DRILL)
		dr = &p->drills[p->ndrills - 1];
	else if (l->sec == SEC_VERIFY)
		vf = &p->verifies[p->nverifies - 1];

	switch ((enum key)k) {
	case K_PATH:
		if (d != NULL)
			set_dataset_path(l, d, v);
		else if (storage_is_remote(v))
			p->repo = dup_str(l, v);	/* s3:... */
		else
			set_path(l, &p->repo, "path", v);
		break;
	case K_KEY_FILE:
		set_path(l, &p->key_file, name, v);
		break;
	case K_PASSPHRASE_FILE:
		set_path(l, &p->passphrase_file, name, v);
		break;
	case K_CATALOG:
		set_path(l, &p->catalog, name, v);
		break;
	case K_METRICS_FILE:
		set_path(l, &p->metrics_file, name, v);
		break;
	case K_KEEP_LAST: case K_KEEP_HOURLY: case K_KEEP_DAILY:
	case K_KEEP_WEEKLY: case K_KEEP_MONTHLY: case K_KEEP_YEARLY:
	case K_KEEP_WITHIN:
		set_keep(l, d != NULL ? &d->keep : &p->keep, (enum key)k, v);
		break;
	case K_SCHEDULE:
		set_schedule(l, dr != NULL ? &dr->sched : vf != NULL ?
		    &vf->sched : &p->prune_sched, name, v);
		break;
	case K_PRUNE:
		if (parse_bool(v, &p->prune))
			error_at(l, l->line, "prune is yes or no, not '%s'", v);
		break;
	case K_MAX_UNUSED:
		if (policy_parse_percent(v, 1, &p->max_unused))
			error_at(l, l->line, "max-unused needs a percentage "
			    "from 0 to 100, not '%s'", v);
		else
			p->max_unused /= 100;
		break;
	case K_EXCLUDE:
		(void)push_str(l, &d->excludes, &d->nexcludes, v);
		break;
	case K_ONE_FILE_SYSTEM:
		if (parse_bool(v, &d->one_file_system))
			error_at(l, l->line, "one-file-system is yes or no, "
			    "not '%s'", v);
		break;
	case K_FULL: case K_DIFFERENTIAL: case K_INCREMENTAL:
		set_schedule(l, &(d != NULL ? d->sched : e->sched)[k - K_FULL],
		    name, v);
		break;
	case K_SETTLE:
		set_duration(l, &d->settle, name, v);
		break;
	case K_REQUIRE:
		if (strchr(v, '/') != NULL || strcmp(v, ".") == 0 ||
		    strcmp(v, "..") == 0)
			error_at(l, l->line, "require names a file in the "
			    "checkpoint directory, not a path: '%s'", v);
		else
			d->require = dup_str(l, v);
		d->require_line = l->line;
		break;
	case K_CHECKPOINTS:
		(void)push_str(l, &d->checkpoints, &d->ncheckpoints, v);
		break;
	case K_TO:
		/* Given, even if refused below: one error, not two. */
		e->to_line = l->line;
		if (strcmp(v, "-") == 0)
			error_at(l, l->line, "to: a policy cannot export to "
			    "standard output");
		else if (strncmp(v, "rclone:", 7) == 0)
			e->to = dup_str(l, v);
		else
			set_path(l, &e->to, name, v);
		break;
	case K_DATASETS:
		if (e != NULL) {
			e->datasets_line = l->line;
			push_names(l, "dataset", &e->datasets, &e->ndatasets,
			    v);
		} else if (dr == NULL) {
			p->keep_datasets_line = l->line;
			push_names(l, "dataset", &p->keep_datasets,
			    &p->nkeep_datasets, v);
		} else {
			dr->datasets_line = l->line;
			push_names(l, "dataset", &dr->datasets,
			    &dr->ndatasets, v);
		}
		break;
	case K_SAMPLE:
		if (policy_parse_percent(v, 0, &dr->sample))
			error_at(l, l->line, "sample needs a percentage above "
			    "0 and at most 100, not '%s'", v);
		break;
	case K_RTO:
		set_duration(l, &dr->rto, name, v);
		break;
	case K_RPO:
		set_duration(l, &dr->rpo, name, v);
		break;
	case K_NO_WRITE:
		if (parse_bool(v, &b))
			error_at(l, l->line, "no-write is yes or no, not '%s'",
			    v);
		else
			dr->no_write = b;
		break;
	case K_FROM:
		dr->from_line = l->line;
		if (strcmp(v, "repository") != 0)
			dr->from = dup_str(l, v);
		break;
	case K_READ_DATA:
		set_read_data(l, vf, v);
		break;
	case K_MAX_DURATION:
		set_duration(l, &vf->max_seconds, name, v);
		break;
	case K__COUNT:
		break;
	}
	return (1);
}

static int
has_schedule(const struct schedule sched[3])
{
	return (sched[0].kind || sched[1].kind || sched[2].kind);
}

static void
check_names(struct loader *l, char *const *names, size_t n, int line)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (policy_dataset_find(l->p, names[i]) == NULL)
			error_at(l, line, "no dataset '%s' in this policy",
			    names[i]);
}

/* What only the whole file tells: required keys, references. */
static void
check_policy(struct loader *l)
{
	struct policy *p = l->p;
	int rules = retention_any(&p->keep);
	size_t i;

	/* Any subset of sections: a backup host's policy may back up
	 * nothing and keep, drill and verify what others back up. */
	if (p->ndatasets == 0 && p->nexports == 0 && p->ndrills == 0 &&
	    p->nverifies == 0 && p->prune_sched.kind == SCHED_NONE &&
	    !retention_any(&p->keep))
		error_at(l, 0, "nothing to do: add a [dataset NAME], "
		    "[retention], [export TARGET], [drill NAME] or "
		    "[verify NAME] section");
	for (i = 0; i < p->ndatasets; i++) {
		const struct policy_dataset *d = &p->datasets[i];

		if (d->path == NULL)
			error_at(l, d->line, "dataset '%s' has no path",
			    d->name);
		if (!has_schedule(d->sched))
			error_at(l, d->line, "dataset '%s' has no schedule: "
			    "give full, differential or incremental", d->name);
		if (d->require != NULL && d->ncheckpoints == 0)
			error_at(l, d->require_line, "dataset '%s': require needs "
			    "checkpoints (the directories it applies to)",
			    d->name);
		rules |= retention_any(&d->keep);
	}
	for (i = 0; i < p->nexports; i++) {
		const struct policy_export *e = &p->exports[i];

		if (e->to == NULL && e->to_line == 0)
			error_at(l, e->line, "export '%s' has no 'to'",
			    e->target);
		if (!has_schedule(e->sched))
			error_at(l, e->line, "export '%s' has no schedule: "
			    "give full, differential or incremental",
			    e->target);
		check_names(l, e->datasets, e->ndatasets, e->datasets_line);
	}
	for (i = 0; i < p->ndrills; i++) {
		const struct policy_drill *d = &p->drills[i];

		if (d->sched.kind == SCHED_NONE)
			error_at(l, d->line, "drill '%s' has no schedule",
			    d->name);
		/* Its datasets are the repository's: known at run time. */
		if (d->from != NULL && policy_export_find(p, d->from) == NULL)
			error_at(l, d->from_line, "from: no export target "
			    "'%s' in this policy (or 'repository')", d->from);
		if (d->no_write && d->from != NULL)
			error_at(l, d->line, "drill '%s': no-write drills the "
			    "repository only, not bundles", d->name);
	}
	for (i = 0; i < p->nverifies; i++)
		if (p->verifies[i].sched.kind == SCHED_NONE)
			error_at(l, p->verifies[i].line, "verify '%s' has no "
			    "schedule", p->verifies[i].name);
	/* Where the schedule belongs: [retention], or nowhere yet. */
	if (rules && p->prune_sched.kind == SCHED_NONE && p->retention_line)
		error_at(l, p->retention_line, "[retention] has no schedule, "
		    "which the keep- rules need (line %d): add 'schedule = "
		    "...'", l->keep_line);
	else if (rules && p->prune_sched.kind == SCHED_NONE)
		error_at(l, 0, "the keep- rules (line %d) need a [retention] "
		    "section with 'schedule = ...' (when forget and prune "
		    "run)", l->keep_line);
	if (p->nkeep_datasets > 0 && !retention_any(&p->keep))
		error_at(l, p->keep_datasets_line, "datasets: [retention] "
		    "has no keep- rule for them");
}

/*
 * The policy file, opened for reading: a regular file (a FIFO would hang
 * the reader, /dev/zero never end) of at most POLICY_MAX_BYTES.  Opened
 * non-blocking so that opening a FIFO does not wait for a writer.  NULL
 * (reported).
 */
static FILE *
open_policy(const char *path)
{
	struct stat st;
	FILE *f;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) ==
	    -1) {
		log_errno("cannot open policy '%s'", path);
		return (NULL);
	}
	if (fstat(fd, &st)) {
		log_errno("cannot open policy '%s'", path);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		log_error("cannot read policy '%s': not a regular file", path);
		goto fail;
	}
	if (st.st_size > POLICY_MAX_BYTES) {
		log_error("cannot read policy '%s': larger than 1 MiB", path);
		goto fail;
	}
	if (fcntl(fd, F_SETFL, 0) == -1 || (f = fdopen(fd, "r")) == NULL) {
		log_errno("cannot open policy '%s'", path);
		goto fail;
	}
	return (f);
fail:
	close(fd);
	return (NULL);
}

struct policy *
policy_load(const char *path)
{
	struct loader l;
	int rc;

	memset(&l, 0, sizeof(l));
	l.file = path;
	if ((l.p = calloc(1, sizeof(*l.p))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	l.p->prune = 1;
	l.p->max_unused = 0.10;
	if ((l.p->file = strdup(path)) == NULL) {
		log_error("out of memory");
		goto err;
	}
	if ((l.f = open_policy(path)) == NULL)
		goto err;
	if ((l.buf = malloc(LINE_MAX_BYTES + 1)) == NULL) {
		log_error("out of memory");
		fclose(l.f);
		goto err;
	}
	/*
	 * libinih's switches (Debian builds them as variables): a buffer
	 * for the longest line, no continuation lines (an indented key is
	 * a key, not more of the value above), comments at the start of a
	 * line ('#', ';') or after blanks (" ;").
	 */
	ini_use_stack = false;
	ini_max_line = LINE_MAX_BYTES;
	ini_allow_multiline = false;
	ini_allow_inline_comments = true;
	ini_stop_on_first_error = false;
	rc = ini_parse_stream(read_line, &l, handle, &l);
	if (l.too_big) {
		/* Grew since it was opened: nothing else is said. */
		log_error("cannot read policy '%s': larger than 1 MiB", path);
		fclose(l.f);
		free(l.buf);
		goto err;
	}
	if (ferror(l.f)) {
		log_errno("cannot read policy '%s'", path);
		l.errors++;
	} else if (rc < 0) {
		log_error("cannot read policy '%s': out of memory", path);
		l.errors++;
	}
	fclose(l.f);
	free(l.buf);
	if (!l.oom)
		check_policy(&l);
	report(&l);
	if (l.errors == 0)
		return (l.p);
	if (!l.oom)
		log_error("%s: %d error%s; nothing was run", path, l.errors,
		    l.errors == 1 ? "" : "s");
err:
	policy_free(l.p);
	return (NULL);
}

void
policy_free(struct policy *p)
{
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->ndatasets; i++) {
		struct policy_dataset *d = &p->datasets[i];

		free(d->name);
		free(d->path);
		names_free(d->excludes, d->nexcludes);
		free(d->require);
		names_free(d->checkpoints, d->ncheckpoints);
	}
	for (i = 0; i < p->nexports; i++) {
		free(p->exports[i].target);
		free(p->exports[i].to);
		names_free(p->exports[i].datasets, p->exports[i].ndatasets);
	}
	for (i = 0; i < p->ndrills; i++) {
		free(p->drills[i].name);
		free(p->drills[i].from);
		names_free(p->drills[i].datasets, p->drills[i].ndatasets);
	}
	for (i = 0; i < p->nverifies; i++)
		free(p->verifies[i].name);
	names_free(p->keep_datasets, p->nkeep_datasets);
	free(p->datasets);
	free(p->exports);
	free(p->drills);
	free(p->verifies);
	free(p->file);
	free(p->repo);
	free(p->key_file);
	free(p->passphrase_file);
	free(p->catalog);
	free(p->metrics_file);
	free(p);
}

const struct retention *
policy_retention(const struct policy *p, const struct policy_dataset *d)
{
	return (retention_any(&d->keep) ? &d->keep : &p->keep);
}

const struct policy_dataset *
policy_dataset_find(const struct policy *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->ndatasets; i++)
		if (strcmp(p->datasets[i].name, name) == 0)
			return (&p->datasets[i]);
	return (NULL);
}

const struct policy_export *
policy_export_find(const struct policy *p, const char *target)
{
	size_t i;

	for (i = 0; i < p->nexports; i++)
		if (strcmp(p->exports[i].target, target) == 0)
			return (&p->exports[i]);
	return (NULL);
}

void
policy_needs_read(const struct policy *p,
    void (*fn)(void *arg, int line, const char *what), void *arg)
{
	char what[160];
	size_t i;

	if (p->prune_sched.kind != SCHED_NONE && (retention_any(&p->keep) ||
	    p->prune))
		fn(arg, p->retention_line, "[retention] (forget and prune)");
	for (i = 0; i < p->ndatasets; i++) {
		const struct policy_dataset *d = &p->datasets[i];

		/* Its rules run on [retention]'s schedule, reported above
		 * when there is one; else the file was refused already. */
		if (d->keep_line > 0 && p->prune_sched.kind != SCHED_NONE) {
			snprintf(what, sizeof(what), "dataset '%s': its keep- "
			    "rules (forget)", d->name);
			fn(arg, d->keep_line, what);
		}
	}
	for (i = 0; i < p->ndrills; i++) {
		snprintf(what, sizeof(what), "[drill %s]", p->drills[i].name);
		fn(arg, p->drills[i].line, what);
	}
	for (i = 0; i < p->nverifies; i++) {
		snprintf(what, sizeof(what), "[verify %s]",
		    p->verifies[i].name);
		fn(arg, p->verifies[i].line, what);
	}
}
