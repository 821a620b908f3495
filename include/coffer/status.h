#ifndef COFFER_STATUS_H
#define COFFER_STATUS_H

/*
 * Exit statuses, documented in man/coffer.1.  Only main() exits; commands
 * return one of these.
 */
enum {
	STATUS_OK = 0,		/* success */
	STATUS_WARN = 1,	/* done, with warnings (a file skipped, ...) */
	STATUS_USAGE = 2,	/* bad command line */
	STATUS_REPO = 3,	/* not a repository, wrong key, locked, ... */
	STATUS_INTEGRITY = 4,	/* damaged or missing data was found */
	STATUS_ERROR = 5,	/* anything else fatal: I/O error, disk full */
	STATUS_OBJECTIVE = 6,	/* a drill passed integrity but missed its
				 * RTO or RPO */
	STATUS_CORRUPTION = 7	/* audit found silent corruption: content
				 * changed, size and mtime unchanged */
};

#endif
