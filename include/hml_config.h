/* Settings, read once from HMEMLOOP_* environment variables at load. */
#ifndef HML_CONFIG_H
#define HML_CONFIG_H

#include <stdbool.h>

enum hml_self_mode {
	HML_SELF_DEVICE,	/* intercept same-process ops touching device memory */
	HML_SELF_ALL,		/* intercept every same-process op */
};

enum hml_hmem_mode {
	HML_HMEM_OFF,
	HML_HMEM_AUTO,		/* hints with FI_MR_HMEM and without FI_HMEM */
	HML_HMEM_ON,		/* any hints without FI_HMEM */
};

struct hml_config {
	bool enable;
	int log_level;			/* enum hml_log_level */
	const char *cuda_library;
	int self;			/* enum hml_self_mode */
	int hmem;			/* enum hml_hmem_mode */
};

extern struct hml_config hml_config;

void hml_config_load(void);

#endif
