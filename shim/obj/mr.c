/* SPDX-License-Identifier: BSD-2-Clause */
/* Memory regions: what was registered, where, with which rights and key. */
#include <stdlib.h>
#include <string.h>

#include "hml_log.h"
#include "hml_msg.h"

/* libfabric 1.20's dmabuf registration; the layout is part of the ABI. */
struct hml_mr_dmabuf {
	int fd;
	uint64_t offset;
	size_t len;
	void *base_addr;
};

/* The region, before its provider is called: the receives its domain
 * holds go to the provider first (hold.c). */
static struct hml_mr *mr_of(struct fid *fid)
{
	struct hml_mr *m = hml_container_of(fid->ops, struct hml_mr, h.fi.ops);

	hml_hold_flush(m->domain);
	return m;
}

/* (Re)enter the region under its current key; under FI_MR_ENDPOINT the
 * key is known only once the region is enabled. */
static void map(struct hml_mr *m)
{
	hml_mrmap_del(&m->domain->mrs, m);
	m->key = m->mr->key;
	m->desc = m->mr->mem_desc;
	if (m->key != FI_KEY_NOTAVAIL)
		hml_mrmap_add(&m->domain->mrs, m);
}

static int hml_mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct hml_mr *m = mr_of(fid);
	struct hml_fid *b = hml_fid_of(bfid);
	int ret;

	ret = m->h.prov->bind(fid, bfid, flags);
	if (ret || !b)
		return ret;
	if (bfid->fclass == FI_CLASS_CNTR) {
		m->cntr = hml_container_of(b, struct hml_cntr, h);
		m->cntr_flags = flags;
	}
	else if (bfid->fclass == FI_CLASS_EP)
		m->ep = hml_container_of(b, struct hml_ep, h);
	return 0;
}

static int hml_mr_control(struct fid *fid, int command, void *arg)
{
	struct hml_mr *m = mr_of(fid);
	int ret;

	ret = m->h.prov->control(fid, command, arg);
	if (!ret && command == FI_ENABLE)
		map(m);
	return ret;
}

static void release(struct hml_fid *h)
{
	struct hml_mr *m = hml_container_of(h, struct hml_mr, h);

	hml_mrmap_del(&m->domain->mrs, m);
	hml_mr_put(m);
}

void hml_mr_wrap(struct hml_domain *d, struct fid_mr *mr,
		 const struct fi_mr_attr *attr, uint64_t flags)
{
	const struct hml_mr_dmabuf *dmabuf = (const void *) attr->mr_iov;
	size_t count = flags & HML_MR_DMABUF ? 1 : attr->iov_count;
	struct hml_mr *m = calloc(1, sizeof(*m) + count * sizeof(m->iov[0]));

	if (!m) {
		hml_warn("out of memory: memory region %p passes through", mr);
		return;
	}
	m->refs = 1;
	m->mr = mr;
	m->domain = d;
	m->access = attr->access;
	m->iface = attr->iface;
	m->device = attr->device.cuda;
	m->iov_count = count;
	if (flags & HML_MR_DMABUF) {
		/* Without a host address the region cannot be copied to. */
		if (dmabuf->base_addr)
			m->iov[0] = (struct iovec) {
				(char *) dmabuf->base_addr + dmabuf->offset,
				dmabuf->len };
	} else {
		memcpy(m->iov, attr->mr_iov, count * sizeof(m->iov[0]));
	}
	for (size_t i = 0; i < count; i++)
		m->len += m->iov[i].iov_len;
	hml_fid_wrap(&m->h, &mr->fid, release);
	m->h.quiesce = hml_inflight_drain;
	hml_table_set(&m->h.fi.ops, bind, hml_mr_bind);
	hml_table_set(&m->h.fi.ops, control, hml_mr_control);
	map(m);
}
