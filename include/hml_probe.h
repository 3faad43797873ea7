/* SPDX-License-Identifier: BSD-2-Clause */
/* Does a provider register CUDA memory? Shared by the library
 * (twin.c) and hmemloop --check. */
#ifndef HML_PROBE_H
#define HML_PROBE_H

#include <stdbool.h>

#include <rdma/fabric.h>

typedef int (*hml_fabric_fn)(struct fi_fabric_attr *attr,
			     struct fid_fabric **fabric, void *context);

bool hml_registers_cuda(hml_fabric_fn fabric_open, const struct fi_info *info);

#endif
