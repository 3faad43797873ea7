/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Provider setup and completion waits shared by both modes. The bench asks
 * for what an application that has never heard of device memory asks for:
 * no FI_HMEM, as in libfabric issue 12328; with --hmem, for what one that
 * knows asks for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "bench.h"

__thread char b_errmsg[256];

/* Every CQ of the process: providers with manual progress move a
 * same-process transfer only when the target's CQ is read too. */
static struct fid_cq *all_cqs[16];

static void fi_check(int ret, const char *what)
{
	if (ret)
		b_die("%s: %s", what, fi_strerror(-ret));
}

double b_stall_s = B_STALL_S;

void b_prefix(const char *what)
{
	char tmp[sizeof(b_errmsg)];

	snprintf(tmp, sizeof(tmp), "%s", b_errmsg);
	snprintf(b_errmsg, sizeof(b_errmsg), "%s%s", what, tmp);
}

int b_post_failed(ssize_t ret, const char *what)
{
	if (!ret)
		return 0;
	if (ret == -FI_ETIMEDOUT)
		snprintf(b_errmsg, sizeof(b_errmsg), "%s: still -FI_EAGAIN "
			 "after %.0f s", what, b_stall_s);
	else
		snprintf(b_errmsg, sizeof(b_errmsg), "%s: %s", what,
			 fi_strerror((int) -ret));
	return -1;
}

int b_fab_open(struct b_fab *f, const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	memset(f, 0, sizeof(*f));
	hints->caps = FI_MSG | FI_RMA;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	if (b_opt.hmem) {
		hints->caps |= FI_HMEM;
		hints->domain_attr->mr_mode |= FI_MR_HMEM;
	}
	/* --peers: issue 12328's application, FI_MR_HMEM without FI_HMEM */
	if (b_opt.mr_hmem)
		hints->domain_attr->mr_mode |= FI_MR_HMEM;
	hints->fabric_attr->prov_name = strdup(prov);
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &f->info);
	fi_freeinfo(hints);
	if (ret == -FI_ENODATA)
		return ret;
	fi_check(ret, "fi_getinfo");
	fi_check(fi_fabric(f->info->fabric_attr, &f->fabric, NULL),
		 "fi_fabric");
	fi_check(fi_domain(f->fabric, f->info, &f->domain, NULL), "fi_domain");
	return 0;
}

void b_fab_close(struct b_fab *f)
{
	fi_close(&f->domain->fid);
	fi_close(&f->fabric->fid);
	fi_freeinfo(f->info);
}

static struct fid_cq *cq_open(struct b_fab *f)
{
	struct fi_cq_attr attr = {
		.format = FI_CQ_FORMAT_CONTEXT,
		.wait_obj = FI_WAIT_NONE,
		.size = 4 * (b_opt.window > B_WINDOW ? b_opt.window : B_WINDOW),
	};
	struct fid_cq *cq;

	fi_check(fi_cq_open(f->domain, &attr, &cq, NULL), "fi_cq_open");
	for (size_t i = 0; i < sizeof(all_cqs) / sizeof(all_cqs[0]); i++)
		if (!all_cqs[i]) {
			all_cqs[i] = cq;
			return cq;
		}
	b_die("too many CQs");
}

/* Separate transmit and receive CQs: counting completions is then all
 * the bench needs, and no context is required per operation. */
void b_ep_open(struct b_ep *e, struct b_fab *f)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };

	memset(e, 0, sizeof(*e));
	fi_check(fi_endpoint(f->domain, f->info, &e->ep, NULL), "fi_endpoint");
	e->tx = cq_open(f);
	e->rx = cq_open(f);
	fi_check(fi_av_open(f->domain, &av_attr, &e->av, NULL), "fi_av_open");
	fi_check(fi_ep_bind(e->ep, &e->tx->fid, FI_TRANSMIT), "fi_ep_bind");
	fi_check(fi_ep_bind(e->ep, &e->rx->fid, FI_RECV), "fi_ep_bind");
	fi_check(fi_ep_bind(e->ep, &e->av->fid, 0), "fi_ep_bind");
	fi_check(fi_enable(e->ep), "fi_enable");
	e->namelen = sizeof(e->name);
	fi_check(fi_getname(&e->ep->fid, e->name, &e->namelen), "fi_getname");
}

static void cq_forget(struct fid_cq *cq)
{
	for (size_t i = 0; i < sizeof(all_cqs) / sizeof(all_cqs[0]); i++)
		if (all_cqs[i] == cq)
			all_cqs[i] = NULL;
}

void b_ep_close(struct b_ep *e)
{
	fi_close(&e->ep->fid);
	fi_close(&e->av->fid);
	cq_forget(e->tx);
	cq_forget(e->rx);
	fi_close(&e->tx->fid);
	fi_close(&e->rx->fid);
}

fi_addr_t b_av_insert(struct b_ep *e, const void *name)
{
	fi_addr_t addr = FI_ADDR_NOTAVAIL;

	if (fi_av_insert(e->av, name, 1, &addr, 0, NULL) != 1)
		b_die("fi_av_insert failed");
	return addr;
}

/* Registered as ordinary memory: the application does not know that
 * the buffer is on the device. With --hmem it does, and says which. */
struct fid_mr *b_mr_reg(struct b_fab *f, void *buf, size_t len, uint64_t key,
			int gpu)
{
	struct iovec iov = { buf, len };
	struct fi_mr_attr attr = {
		.mr_iov = &iov,
		.iov_count = 1,
		.access = FI_SEND | FI_RECV | FI_READ | FI_WRITE |
			  FI_REMOTE_READ | FI_REMOTE_WRITE,
		.requested_key = key,
		.iface = b_opt.hmem && gpu >= 0 ? FI_HMEM_CUDA : FI_HMEM_SYSTEM,
		.device.cuda = gpu,
	};
	struct fid_mr *mr;
	int ret = fi_mr_regattr(f->domain, &attr, 0, &mr);

	if (ret == -FI_ENOSYS && attr.iface == FI_HMEM_CUDA)
		b_die("--hmem: the provider cannot register CUDA memory here "
		      "(a libfabric without CUDA support, or whose CUDA support "
		      "did not start)");
	fi_check(ret, "fi_mr_regattr");
	return mr;
}

void b_mr_close(struct fid_mr *mr)
{
	if (mr)
		fi_close(&mr->fid);
}

uint64_t b_raddr(const struct b_fab *f, const void *buf)
{
	return f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ?
	       (uint64_t) (uintptr_t) buf : 0;
}

void b_progress(void)
{
	for (size_t i = 0; i < sizeof(all_cqs) / sizeof(all_cqs[0]); i++)
		if (all_cqs[i])
			fi_cq_read(all_cqs[i], NULL, 0);
}

static long cq_error(struct fid_cq *cq)
{
	struct fi_cq_err_entry err = { 0 };

	if (fi_cq_readerr(cq, &err, 0) != 1)
		snprintf(b_errmsg, sizeof(b_errmsg), "CQ error, unreadable");
	else
		snprintf(b_errmsg, sizeof(b_errmsg),
			 "error completion: %s (prov_errno %d)",
			 fi_strerror(abs(err.err)), err.prov_errno);
	return -1;
}

long b_cq_poll(struct fid_cq *cq, long max)
{
	struct fi_cq_entry ent[B_WINDOW];
	ssize_t ret;

	if (max > B_WINDOW)
		max = B_WINDOW;
	/* A read of no entries (max 0) only drives progress: 0 or EAGAIN. */
	ret = fi_cq_read(cq, ent, max);
	if (ret >= 0)
		return ret;
	if (ret == -FI_EAGAIN)
		return 0;
	if (ret == -FI_EAVAIL)
		return cq_error(cq);
	snprintf(b_errmsg, sizeof(b_errmsg), "fi_cq_read: %s",
		 fi_strerror((int) -ret));
	return -1;
}

/* The clock is read rarely: most waits end within a few spins and the
 * timed loops should not pay for it. */
bool b_stalled(struct b_stall *s, long got)
{
	if (got) {
		s->spins = 0;
		s->end = 0;
		return false;
	}
	if (!s->alone)
		b_progress();
	if (++s->spins % 4096)
		return false;
	if (!s->end) {
		s->end = b_now() + b_stall_s;
		return false;
	}
	return b_now() > s->end;
}

int b_cq_wait_for(struct fid_cq *cq, long n, bool alone)
{
	struct b_stall st = { 0, 0, alone };
	long got;

	while (n > 0) {
		got = b_cq_poll(cq, n);
		if (got < 0)
			return -1;
		n -= got;
		if (n && b_stalled(&st, got)) {
			snprintf(b_errmsg, sizeof(b_errmsg),
				 "no completion in %.0f s", b_stall_s);
			return -1;
		}
	}
	return 0;
}

int b_cq_wait(struct fid_cq *cq, long n)
{
	return b_cq_wait_for(cq, n, false);
}
