/*
 * Bundle transports (include/coffer/remote.h): a directory, a pipe, or
 * the rclone binary.  rclone is run directly (fork and exec, no shell),
 * with the bundle's bytes on its standard input or output, so that it
 * never needs a temporary copy.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coffer/buf.h"
#include "coffer/bundle.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/remote.h"
#include "coffer/signals.h"
#include "coffer/storage.h"

#define RCLONE_PREFIX "rclone:"

int
remote_parse(const char *spec, struct remote *t)
{
	memset(t, 0, sizeof(*t));
	if (spec[0] == '\0') {
		log_error("an empty bundle location");
		return (-1);
	}
	if (strcmp(spec, "-") == 0)
		t->kind = REMOTE_PIPE;
	else if (strncmp(spec, RCLONE_PREFIX, strlen(RCLONE_PREFIX)) == 0) {
		t->kind = REMOTE_RCLONE;
		if (strchr(spec + strlen(RCLONE_PREFIX), ':') == NULL) {
			log_error("'%s': an rclone location is "
			    "rclone:REMOTE:PATH", spec);
			return (-1);
		}
		/* rclone would take it for an option (--log-file=...);
		 * "--" before it says otherwise too, but no remote's name
		 * begins with '-'. */
		if (spec[strlen(RCLONE_PREFIX)] == '-') {
			log_error("'%s': an rclone remote cannot begin with "
			    "'-'", spec);
			return (-1);
		}
	} else
		t->kind = REMOTE_DIR;
	if ((t->spec = strdup(spec)) == NULL ||
	    (t->path = strdup(t->kind == REMOTE_RCLONE ?
	    spec + strlen(RCLONE_PREFIX) : spec)) == NULL) {
		log_errno("out of memory");
		remote_release(t);
		return (-1);
	}
	return (0);
}

void
remote_release(struct remote *t)
{
	free(t->spec);
	free(t->path);
	t->spec = t->path = NULL;
}

/* A bundle's file name: letters, digits, '.', '_', '-', ending ".cfb". */
static int
bundle_name_ok(const char *name)
{
	size_t n = strlen(name), s = strlen(BUNDLE_SUFFIX);

	return (n > s && name_ok(name, 127) &&
	    strcmp(name + n - s, BUNDLE_SUFFIX) == 0);
}

static int
cmp_names(const void *a, const void *b)
{
	return (strcmp(*(char *const *)a, *(char *const *)b));
}

static int
push_name(char ***v, size_t *n, size_t *cap, const char *name)
{
	if (array_grow(v, cap, *n, sizeof(**v), 16) ||
	    ((*v)[*n] = strdup(name)) == NULL) {
		log_errno("out of memory");
		return (-1);
	}
	(*n)++;
	return (0);
}

/* REMOTE:PATH joined with name. */
static char *
rclone_join(const struct remote *t, const char *name)
{
	size_t n = strlen(t->path);
	char *s;

	if (asprintf(&s, "%s%s%s", t->path, n > 0 && t->path[n - 1] != ':' &&
	    t->path[n - 1] != '/' ? "/" : "", name) < 0) {
		log_errno("out of memory");
		return (NULL);
	}
	return (s);
}

/*
 * Run rclone with argv; its standard input (dir 0) or output (dir 1) is a
 * pipe whose other end goes to *fd.  Its standard error goes to a memory
 * file, *errfd (or -1, then to coffer's): rclone_wait says its last line
 * when it fails, in one error, and nothing of it when it succeeds (its
 * notices would break the silence of a good run under cron).  The pid,
 * or -1.  A signal that stops coffer stops it too (signals_child), until
 * rclone_wait reaps it.
 */
static pid_t
rclone_spawn(const char *const argv[], int dir, int *fd, int *errfd)
{
	sigset_t none;
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC)) {
		log_errno("cannot run rclone");
		return (-1);
	}
	*errfd = memfd_create("rclone-stderr", MFD_CLOEXEC);
	if ((pid = fork()) == -1) {
		log_errno("cannot run rclone");
		close(p[0]);
		close(p[1]);
		if (*errfd != -1)
			close(*errfd);
		*errfd = -1;
		return (-1);
	}
	if (pid == 0) {
		/* Not the mask of whichever thread forked, nor coffer's
		 * ignored SIGPIPE: rclone's own defaults. */
		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		(void)signal(SIGPIPE, SIG_DFL);
		if (dup2(p[dir == 0 ? 0 : 1], dir) == -1 || (*errfd != -1 &&
		    dup2(*errfd, STDERR_FILENO) == -1))
			_exit(127);
		execvp("rclone", (char *const *)argv);
		/* Only async-signal-safe calls in a child of a threaded
		 * process; the parent says the rest (exit status 127). */
		(void)!write(STDERR_FILENO, "coffer: cannot run rclone\n",
		    26);
		_exit(127);
	}
	signals_child(pid);
	close(p[dir == 0 ? 0 : 1]);
	*fd = p[dir == 0 ? 1 : 0];
	return (pid);
}

/* How long rclone has to end after SIGTERM before SIGKILL, in ms. */
#define RCLONE_GRACE_MS 1000

/*
 * Wait for rclone to end, without reaping it (its pid stays its own).
 * When stop is set or a signal was caught, it is asked to end (SIGTERM),
 * then made to after RCLONE_GRACE_MS.
 */
static void
rclone_await(pid_t pid, int stop)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	siginfo_t si;
	int ms = 0, stopping = 0;

	for (;;) {
		if (!stopping && (stop || signals_caught())) {
			kill(pid, SIGTERM);
			stopping = 1;
		}
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT |
		    (stopping ? WNOHANG : 0)) == -1) {
			if (errno == EINTR)
				continue;
			return;		/* waitpid says why */
		}
		if (si.si_pid == pid)
			return;
		if (ms >= RCLONE_GRACE_MS) {
			kill(pid, SIGKILL);
			stopping = 0;
			stop = 0;
			/* Blocking now: SIGKILL is not refused. */
			while (waitid(P_PID, (id_t)pid, &si, WEXITED |
			    WNOWAIT) == -1 && errno == EINTR)
				;
			return;
		}
		nanosleep(&tick, NULL);
		ms += 10;
	}
}

/*
 * Reap rclone (stopping it first when stop is set or a signal was
 * caught, as rclone_await): 0 if it succeeded.  One that a signal to
 * coffer stopped is not reported (the signal is what stopped the run),
 * nor one killed after stop; one that failed of itself is, with the last
 * line it wrote, as it is why the run failed.  Closes errfd.
 */
static int
rclone_wait(pid_t pid, int errfd, const char *what, int stop)
{
	char why[512];
	int st;

	rclone_await(pid, stop);
	/* Ended, not yet reaped: the pid cannot be another's. */
	signals_child(0);
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR) {
			log_errno("rclone (%s)", what);
			goto fail;
		}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		if (errfd != -1)
			close(errfd);
		return (0);
	}
	if (signals_caught() || (stop && !WIFEXITED(st)))
		goto fail;
	storage_rclone_last_line(errfd, why, sizeof(why));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		log_error("rclone %s failed: cannot run rclone (is it "
		    "installed?)", what);
	else if (why[0] != '\0')
		log_error("rclone %s failed: %s", what, why);
	else if (WIFEXITED(st))
		log_error("rclone %s failed: exit status %d", what,
		    WEXITSTATUS(st));
	else
		log_error("rclone %s failed: killed by signal %d", what,
		    WTERMSIG(st));
fail:
	if (errfd != -1)
		close(errfd);
	return (-1);
}

static int
list_rclone(const struct remote *t, char ***v, size_t *n, size_t *cap)
{
	const char *argv[] = { "rclone", "lsf", "--files-only", "--", t->path,
	    NULL };
	struct buf out = BUF_INIT;
	char chunk[4096], *line, *save = NULL;
	ssize_t got;
	pid_t pid;
	int fd, errfd, rc = -1;

	if ((pid = rclone_spawn(argv, 1, &fd, &errfd)) == -1)
		return (-1);
	while ((got = read(fd, chunk, sizeof(chunk))) != 0) {
		if (got < 0) {
			if (errno == EINTR && !signals_caught())
				continue;
			if (errno != EINTR)
				log_errno("rclone lsf '%s'", t->path);
			break;
		}
		if (out.len + (size_t)got > (16u << 20) ||
		    buf_append(&out, chunk, (size_t)got)) {
			log_error("rclone lsf '%s': listing too large",
			    t->path);
			break;
		}
	}
	close(fd);
	if (rclone_wait(pid, errfd, "lsf", got != 0) == 0 && got == 0 &&
	    buf_put_u8(&out,
	    0) == 0) {
		rc = 0;
		for (line = strtok_r((char *)out.data, "\n", &save); line &&
		    rc == 0; line = strtok_r(NULL, "\n", &save))
			if (bundle_name_ok(line))
				rc = push_name(v, n, cap, line);
	}
	buf_release(&out);
	return (rc);
}

int
remote_list(const struct remote *t, char ***names, size_t *n)
{
	struct dirent *de;
	char **v = NULL;
	size_t k = 0, cap = 0;
	DIR *d;
	int rc = 0;

	*names = NULL;
	*n = 0;
	if (t->kind == REMOTE_PIPE) {
		log_error("a pipe cannot be listed");
		return (-1);
	}
	if (t->kind == REMOTE_RCLONE)
		rc = list_rclone(t, &v, &k, &cap);
	else {
		if ((d = opendir(t->path)) == NULL) {
			log_errno("cannot open '%s'", t->path);
			return (-1);
		}
		while (rc == 0 && (de = readdir(d)) != NULL)
			if (bundle_name_ok(de->d_name))
				rc = push_name(&v, &k, &cap, de->d_name);
		closedir(d);
	}
	if (rc) {
		while (k > 0)
			free(v[--k]);
		free(v);
		return (-1);
	}
	if (k > 0)
		qsort(v, k, sizeof(*v), cmp_names);
	*names = v;
	*n = k;
	return (0);
}

/* rclone VERB -- REMOTE:PATH/name, its stdin (dir 0) or stdout in s->fd. */
static int
rclone_stream(const struct remote *t, const char *verb, const char *name,
    int dir, struct remote_stream *s)
{
	const char *argv[] = { "rclone", verb, "--", NULL, NULL };
	char *arg;

	if ((arg = rclone_join(t, name)) == NULL)
		return (-1);
	argv[3] = arg;
	s->pid = rclone_spawn(argv, dir, &s->fd, &s->errfd);
	free(arg);
	return (s->pid == -1 ? -1 : 0);
}

static void
stream_init(struct remote_stream *s, const struct remote *t)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->dfd = -1;
	s->errfd = -1;
	s->t = t;
}

int
remote_put_begin(const struct remote *t, const char *name,
    struct remote_stream *s)
{
	stream_init(s, t);
	switch (t->kind) {
	case REMOTE_PIPE:
		if (isatty(STDOUT_FILENO)) {
			log_error("will not write a bundle to a terminal "
			    "(redirect standard output)");
			return (-1);
		}
		s->fd = STDOUT_FILENO;
		return (0);
	case REMOTE_RCLONE:
		return (rclone_stream(t, "rcat", name, 0, s));
	case REMOTE_DIR:
		break;
	}
	if ((s->dfd = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) ==
	    -1) {
		log_errno("cannot open directory '%s'", t->path);
		return (-1);
	}
	if ((s->name = strdup(name)) == NULL ||
	    asprintf(&s->tmp, ".%s.tmp", name) < 0) {
		log_errno("out of memory");
		s->tmp = NULL;
		goto err;
	}
	/* A leftover of a run that died is replaced, never followed.  A
	 * read-only file system refuses the unlink before it looks: that is
	 * a file that cannot be created. */
	if (unlinkat(s->dfd, s->tmp, 0) && errno != ENOENT) {
		if (errno == EROFS)
			log_errno("cannot create '%s/%s'", t->path, s->tmp);
		else
			log_errno("cannot remove '%s/%s'", t->path, s->tmp);
		goto err;
	}
	if ((s->fd = openat(s->dfd, s->tmp, O_WRONLY | O_CREAT | O_EXCL |
	    O_NOFOLLOW | O_CLOEXEC, 0644)) == -1) {
		log_errno("cannot create '%s/%s'", t->path, s->tmp);
		goto err;
	}
	return (0);
err:
	close(s->dfd);
	free(s->name);
	free(s->tmp);
	stream_init(s, t);
	return (-1);
}

int
remote_put_end(struct remote_stream *s, int ok)
{
	int rc = ok ? 0 : -1;

	switch (s->t->kind) {
	case REMOTE_PIPE:
		return (rc);
	case REMOTE_RCLONE:
		/* Stopped before the end of its input, never after: rcat
		 * stores what it got once its input ends. */
		if (!ok)
			kill(s->pid, SIGTERM);
		close(s->fd);
		if (rclone_wait(s->pid, s->errfd, "rcat", !ok))
			rc = -1;
		return (rc);
	case REMOTE_DIR:
		break;
	}
	if (ok && fsync(s->fd)) {
		log_errno("cannot write '%s/%s'", s->t->path, s->tmp);
		rc = -1;
	}
	if (close(s->fd) && ok && rc == 0) {
		log_errno("cannot write '%s/%s'", s->t->path, s->tmp);
		rc = -1;
	}
	if (rc == 0 && renameat(s->dfd, s->tmp, s->dfd, s->name)) {
		log_errno("cannot rename '%s/%s'", s->t->path, s->tmp);
		rc = -1;
	}
	if (rc == 0 && fsync(s->dfd)) {
		log_errno("fsync of directory '%s' failed", s->t->path);
		rc = -1;
	}
	if (rc)
		unlinkat(s->dfd, s->tmp, 0);
	close(s->dfd);
	free(s->name);
	free(s->tmp);
	return (rc);
}

int
remote_get_begin(const struct remote *t, const char *name,
    struct remote_stream *s)
{
	struct stat st;
	int dfd;

	stream_init(s, t);
	switch (t->kind) {
	case REMOTE_PIPE:
		s->fd = STDIN_FILENO;
		return (0);
	case REMOTE_RCLONE:
		return (rclone_stream(t, "cat", name, 1, s));
	case REMOTE_DIR:
		break;
	}
	if ((dfd = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		log_errno("cannot open directory '%s'", t->path);
		return (-1);
	}
	s->fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC);
	if (s->fd == -1)
		log_errno("cannot open '%s/%s'", t->path, name);
	else if (fstat(s->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		/* Not a FIFO that never ends, nor a device. */
		log_error("'%s/%s' is not a regular file: refused", t->path,
		    name);
		close(s->fd);
		s->fd = -1;
	}
	close(dfd);
	return (s->fd == -1 ? -1 : 0);
}

int
remote_get_end(struct remote_stream *s)
{
	if (s->t->kind == REMOTE_PIPE)
		return (0);
	close(s->fd);
	if (s->t->kind == REMOTE_RCLONE)
		return (rclone_wait(s->pid, s->errfd, "cat", 0));
	return (0);
}
