/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The MR map (shim/data/mrmap.c): regions found by key and by descriptor, past
 * the table's growth, each lookup holding the region; regions removed are
 * found no more, and removing one twice is harmless; under FI_MR_ENDPOINT a
 * key finds its own endpoint's region only (or its scalable endpoint's).
 */
#include <stdlib.h>

#include "hml.h"
#include "unit.h"

#define N 1000			/* past several doublings of 64 buckets */

static struct hml_mr *mrs[N];

static struct hml_mr *mr_new(uint64_t key, void *desc, struct hml_ep *ep)
{
	struct hml_mr *mr = calloc(1, sizeof(*mr));

	mr->key = key;
	mr->desc = desc;
	mr->ep = ep;
	return mr;
}

/* Every region found, by key and by descriptor; each lookup holds it. */
static void find_all(struct hml_mrmap *m, struct hml_ep *ep, int from)
{
	for (int i = from; i < N; i++) {
		int refs = mrs[i]->refs;

		u_check(hml_mrmap_key(m, mrs[i]->key, ep) == mrs[i],
			"key %#lx not found", (unsigned long) mrs[i]->key);
		u_check(hml_mrmap_desc(m, mrs[i]->desc) == mrs[i],
			"descriptor %p not found", mrs[i]->desc);
		u_check(mrs[i]->refs == refs + 2, "region %d: refs %d, "
			"expected %d", i, mrs[i]->refs, refs + 2);
	}
}

int main(void)
{
	struct hml_ep ep1 = { 0 }, ep2 = { 0 }, sep = { 0 }, ctx = { 0 };
	struct hml_mr *own, *of_sep;
	struct hml_mrmap m = { 0 };

	u_check(hml_mrmap_init(&m) == 0, "init failed");
	/* Keys and descriptors alike in their low bits, as providers
	 * hand them out. */
	for (int i = 0; i < N; i++) {
		mrs[i] = mr_new((uint64_t) i << 32 | 7,
				(char *) NULL + 0x1000 * (i + 1), NULL);
		hml_mrmap_add(&m, mrs[i]);
	}
	find_all(&m, &ep1, 0);
	u_check(!hml_mrmap_key(&m, 12345, &ep1), "an unknown key found");
	u_check(!hml_mrmap_desc(&m, (void *) 8), "an unknown descriptor found");

	for (int i = 0; i < N / 2; i++)
		hml_mrmap_del(&m, mrs[i]);
	hml_mrmap_del(&m, mrs[0]);
	u_check(m.count == N - N / 2, "count %zu after removing %d of %d",
		m.count, N / 2, N);
	for (int i = 0; i < N / 2; i++) {
		u_check(!mrs[i]->mapped, "region %d still marked mapped", i);
		u_check(!hml_mrmap_key(&m, mrs[i]->key, &ep1),
			"removed key %#lx found", (unsigned long) mrs[i]->key);
		u_check(!hml_mrmap_desc(&m, mrs[i]->desc),
			"removed descriptor %p found", mrs[i]->desc);
	}
	find_all(&m, &ep1, N / 2);

	/* FI_MR_ENDPOINT: one key, bound to ep1, and to a scalable
	 * endpoint whose context ctx is. */
	ctx.sep = &sep;
	ep1.sep = ep2.sep = NULL;
	own = mr_new(99, (void *) 0x10, &ep1);
	hml_mrmap_add(&m, own);
	u_check(hml_mrmap_key(&m, 99, &ep1) == own, "ep1's key not found");
	u_check(!hml_mrmap_key(&m, 99, &ep2), "ep1's key found for ep2");
	of_sep = mr_new(98, (void *) 0x20, &sep);
	hml_mrmap_add(&m, of_sep);
	u_check(hml_mrmap_key(&m, 98, &ctx) == of_sep,
		"the scalable endpoint's key not found for its context");
	u_check(!hml_mrmap_key(&m, 98, &ep1),
		"the scalable endpoint's key found for another endpoint");

	hml_mrmap_del(&m, own);
	hml_mrmap_del(&m, of_sep);
	for (int i = N / 2; i < N; i++)
		hml_mrmap_del(&m, mrs[i]);
	u_check(m.count == 0, "count %zu with every region removed", m.count);
	hml_mrmap_fini(&m);
	for (int i = 0; i < N; i++)
		free(mrs[i]);
	free(own);
	free(of_sep);
	return u_done("MR map: by key and descriptor, through growth, removal, "
		      "FI_MR_ENDPOINT");
}
