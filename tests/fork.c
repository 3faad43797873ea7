/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fork() after the fabric is up: the child is another process. The parent
 * has an endpoint in its own AV, a region and a same-process transfer
 * behind it; its child opens a fabric of its own, inserts the parent's
 * address, writes into the parent's region and sends it a message. Both
 * must reach the parent through the provider, as without hmemloop, not
 * stay in the child's copy of the parent's memory. The harness compares
 * the "digest:" lines with a run without hmemloop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmltest.h"

#define LEN	4096
#define MSG	300

struct parent {
	struct t_fabric f;
	struct t_ep e;
	struct t_mr mr;
	char buf[2 * LEN];		/* written at 0, received into at LEN */
};

/* The child: a fresh fabric, a write and a send to the parent. */
static void child(struct parent *p)
{
	struct t_fabric f;
	struct t_ep e;
	struct t_mr mr;
	static char buf[LEN];
	fi_addr_t dest;
	int ctx;

	/* The parent's CQ is not this process's to drive. */
	t_unprogress(p->e.cq);
	t_open(&f, NULL);
	t_ep_open(&e, &f, NULL);
	dest = t_insert(&e, p->e.name);
	t_fill(buf, LEN, 7);
	t_reg(&f, buf, LEN, FI_WRITE | FI_SEND, 0, &mr);
	t_post(e.cq, fi_write(e.ep, buf, LEN, mr.desc, dest,
			      t_raddr(&p->f, &p->mr, 0), p->mr.key, &ctx));
	t_expect(e.cq, &ctx, FI_WRITE, (size_t) -1);
	t_post(e.cq, fi_send(e.ep, buf, MSG, mr.desc, dest, &ctx));
	t_expect(e.cq, &ctx, FI_SEND, (size_t) -1);
	/* No exit handlers: libfabric's would tidy up the parent's objects. */
	_exit(0);
}

static void run(void)
{
	struct parent *p = calloc(1, sizeof(*p));
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	fi_addr_t self;
	int ctx, st;
	pid_t pid;

	t_open(&p->f, NULL);
	t_ep_open(&p->e, &p->f, NULL);
	t_reg(&p->f, p->buf, sizeof(p->buf), FI_WRITE | FI_RECV |
	      FI_REMOTE_WRITE, 1, &p->mr);
	/* An address of this process in its AV, and an operation to it:
	 * the registry and a verdict the child must not inherit. */
	self = t_insert(&p->e, p->e.name);
	t_fill(p->buf + LEN, 64, 3);
	t_post(p->e.cq, fi_write(p->e.ep, p->buf + LEN, 64, p->mr.desc, self,
				 t_raddr(&p->f, &p->mr, 0), p->mr.key, &ctx));
	t_expect(p->e.cq, &ctx, FI_WRITE, (size_t) -1);
	memset(p->buf, 0, sizeof(p->buf));

	fflush(stdout);
	pid = fork();
	t_assert(pid >= 0, "fork");
	if (!pid)
		child(p);
	t_post(p->e.cq, fi_recv(p->e.ep, p->buf + LEN, LEN, p->mr.desc,
				FI_ADDR_UNSPEC, &ctx));
	switch (t_wait(p->e.cq, &ent, &err)) {
	case 0:
		break;
	case 1:
		t_fail("the child's message: error %d (%s)", err.err,
		       fi_strerror(err.err));
	default:
		t_fail("the child's message never arrived");
	}
	t_assert(ent.op_context == &ctx && ent.len == MSG,
		 "completion for %p, len %zu", ent.op_context, ent.len);
	t_assert(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		 !WEXITSTATUS(st), "the child failed: status %#x", st);
	printf("digest: written crc %08x\n", t_crc(p->buf, LEN));
	printf("digest: received crc %08x\n", t_crc(p->buf + LEN, MSG));
	t_assert(t_check(p->buf, LEN, 7), "the child's write did not arrive");
	t_assert(t_check(p->buf + LEN, MSG, 7),
		 "the child's message arrived with the wrong bytes");
	t_ok("the child's write and message reached the parent");
	t_fi(fi_close(&p->mr.mr->fid));
	t_ep_close(&p->e);
	t_close(&p->f);
	free(p);
}

/* The fork again where hmemloop does host operations too. */
static const struct t_case cases[] = {
	T_CASE("fork", run),
};

T_MAIN(cases);
