/* SPDX-License-Identifier: BSD-2-Clause */
/* What every wrapped object shares: its fid-ops copy and its close. */
#include <stdlib.h>
#include <string.h>

#include "hml_config.h"
#include "hml_log.h"
#include "hml_msg.h"

void hml_table_copy(void *copy, const void *prov)
{
	size_t size = *(const size_t *) prov;

	if (size > HML_TABLE_SPACE) {
		hml_warn_once("an op table of %zu bytes is larger than %d: its "
			      "newest operations will report -FI_ENOSYS",
			      size, HML_TABLE_SPACE);
		size = HML_TABLE_SPACE;
	}
	memset(copy, 0, HML_TABLE_SPACE);
	memcpy(copy, prov, size);
	*(size_t *) copy = size;
}

/* Objects wrapped and not yet closed: reported at exit, for leak hunts. */
static unsigned long live;

static int hml_close(struct fid *fid)
{
	struct hml_fid *h = hml_container_of(fid->ops, struct hml_fid, fi.ops);
	int ret;

	/* Nothing is freed under a copy in flight (hml_op.h), and the
	 * provider sees every receive posted before it closes anything. */
	if (h->quiesce)
		h->quiesce();
	hml_hold_flush_every();
	ret = HML_FORWARD(h->prov->close(fid));
	/* The provider freed the object: touch neither it nor, on failure,
	 * our state, which stays valid for a retried close. */
	if (!ret) {
		__atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
		h->release(h);
	}
	return ret;
}

void hml_fid_wrap(struct hml_fid *h, struct fid *fid,
		  void (*release)(struct hml_fid *h))
{
	h->prov = fid->ops;
	h->fid = fid;
	h->release = release;
	hml_table_copy(&h->fi, fid->ops);
	hml_table_set(&h->fi.ops, close, hml_close);
	fid->ops = &h->fi.ops;
	__atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
}

struct hml_fid *hml_fid_of(const struct fid *fid)
{
	if (!fid || !fid->ops || fid->ops->close != hml_close)
		return NULL;
	return hml_container_of(fid->ops, struct hml_fid, fi.ops);
}


__attribute__((destructor)) static void report_live(void)
{
	if (hml_config.enable)
		hml_debug("exit with %lu objects open", live);
}
