/* Completion queues. */
#include <stdlib.h>

#include "hml.h"
#include "hml_log.h"

static void release(struct hml_fid *h)
{
	struct hml_cq *cq = container_of(h, struct hml_cq, h);

	pthread_mutex_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
}

void hml_cq_wrap(struct hml_domain *d, struct fid_cq *cq,
		 const struct fi_cq_attr *attr)
{
	struct hml_cq *c = calloc(1, sizeof(*c));

	if (!c) {
		hml_warn("out of memory: completion queue %p passes through", cq);
		return;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->cq = cq;
	c->domain = d;
	c->format = attr->format;
	hml_fid_wrap(&c->h, &cq->fid, release);
}
