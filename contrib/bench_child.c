/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A child of hmemloop-bench: this program started again with an internal
 * option, driven over a socket on its stdin and stdout, one line a
 * command and one an answer (--peers' target, mode 1's rate workers).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

pid_t b_spawn(char **argv, const char *setting, int *fd)
{
	static char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int sv[2];
	pid_t pid;

	if (n < 0)
		b_die("/proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	argv[0] = self;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		b_die("socketpair: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		b_die("fork: %s", strerror(errno));
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(sv[1], 0);
		dup2(sv[1], 1);
		if (setting)
			putenv((char *) setting);
		execv(self, argv);
		_exit(127);
	}
	close(sv[1]);
	*fd = sv[0];
	return pid;
}

const char *b_ended(pid_t pid, bool stop)
{
	static char how[64];
	pid_t r = 0;
	int st;

	for (int i = 0; stop && i < 10 && !r; i++) {
		r = waitpid(pid, &st, WNOHANG);
		if (!r)
			usleep(10000);
	}
	if (stop && !r) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return "was running: stopped";
	}
	if (!r && waitpid(pid, &st, 0) != pid)
		return "lost";
	if (WIFSIGNALED(st))
		snprintf(how, sizeof(how), "killed by signal %d", WTERMSIG(st));
	else
		snprintf(how, sizeof(how), "exited %d", WEXITSTATUS(st));
	return how;
}

int b_say(int fd, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vdprintf(fd, fmt, ap);
	va_end(ap);
	return n < 0 ? -1 : 0;
}

int b_hear(int fd, char *line, size_t len, double deadline)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t n = 0;
	int ms;

	while (n < len - 1) {
		ms = (int) ((deadline - b_now()) * 1000);
		if (ms <= 0 || poll(&p, 1, ms) <= 0 || read(fd, line + n, 1) != 1)
			return -1;
		if (line[n] == '\n')
			break;
		n++;
	}
	line[n] = '\0';
	return 0;
}

int b_vask(int fd, char *line, size_t len, double timeout, char *cmd,
	   size_t cmdlen, const char *fmt, va_list ap)
{
	vsnprintf(cmd, cmdlen, fmt, ap);
	return b_say(fd, "%s\n", cmd) ||
	       b_hear(fd, line, len, b_now() + timeout) ? -1 : 0;
}
