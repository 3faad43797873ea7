/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The output of mode 1 and --cross: a header that says what was measured,
 * three tables a direction (latency; bandwidth and message rate; hmemloop
 * against the ceiling, and staging where the mode has it), and the CSV
 * with every number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_dev.h"
#include "contrib/bench_commit.h"

/* Table columns: the ceiling is the faster of its two variants. */
#define CEIL (-1)
static const int all_columns[] = { CEIL, M_WRITE, M_READ, M_SEND, M_STAGING };
#define MAX_COLS ((int) (sizeof(all_columns) / sizeof(all_columns[0])))

/* The columns of the mode's methods: how many. */
static int columns(int *cols)
{
	int n = 0;

	for (int i = 0; i < MAX_COLS; i++)
		if (all_columns[i] == CEIL || b_has(all_columns[i]))
			cols[n++] = all_columns[i];
	return n;
}

static int ceil_pick(const struct b_results *r, int d, int s)
{
	const struct b_point *a = &r->p[d][M_CEIL_A][s];
	const struct b_point *b = &r->p[d][M_CEIL_B][s];

	if (a->status != P_OK)
		return b->status == P_OK ? M_CEIL_B : -1;
	if (b->status != P_OK)
		return M_CEIL_A;
	return b->lat.median < a->lat.median ? M_CEIL_B : M_CEIL_A;
}

/* "async" for ceiling_async: the table's via column. */
static const char *via(int m)
{
	const char *name = b_mode->methods[m].name;

	return strncmp(name, "ceiling_", 8) ? name : name + 8;
}

static const struct b_point *point(const struct b_results *r, int d, int m,
				   int s)
{
	if (m == CEIL)
		m = ceil_pick(r, d, s);
	return m < 0 ? NULL : &r->p[d][m][s];
}

static const struct b_point *ok(const struct b_results *r, int d, int m,
				int s)
{
	const struct b_point *p = point(r, d, m, s);

	return p && p->status == P_OK ? p : NULL;
}

static const char *col_name(int m)
{
	return m == CEIL ? "ceiling" : b_mode->methods[m].name;
}

/* Three significant digits or so, in at most 8 characters. */
static const char *num(double v, char *b, size_t len)
{
	if (v >= 1e6)
		snprintf(b, len, "%.3g", v);
	else if (v >= 100)
		snprintf(b, len, "%.0f", v);
	else if (v >= 10)
		snprintf(b, len, "%.1f", v);
	else if (v >= 1)
		snprintf(b, len, "%.2f", v);
	else
		snprintf(b, len, "%.2g", v);
	return b;
}

/* What stands in a cell without a number. */
static const char *no_number(const struct b_results *r, int d, int m, int s)
{
	const struct b_point *p = point(r, d, m, s);

	if (!p || p->status == P_NONE)
		return m != CEIL && b_left_out(r, m) ? "no-shim" : "-";
	switch (p->status) {
	case P_UNAVAIL: return "n/a";
	case P_FAILED: return "failed";
	case P_SKIPPED: return "skipped";
	default: return "-";
	}
}

static double bw(const struct b_point *p, size_t len)
{
	return len / p->lat.median;
}

/* The devices, by name, the driver, and --cross's peer access. */
static void cuda_lines(const struct b_ctx *c)
{
	int v = b_cuda_version();

	if (b_mode->gpus == 1) {
		printf("CUDA: %s, driver API %d.%d\n", b_cuda_device(0),
		       v / 1000, v % 1000 / 10);
		return;
	}
	printf("CUDA: GPU 0 %s, GPU 1 %s, driver API %d.%d\n",
	       b_cuda_device(0), b_cuda_device(1), v / 1000, v % 1000 / 10);
	printf("peer access: %s\n", c->p2p);
}

void b_report_header(const struct b_ctx *c, const struct b_results *r)
{
	char a[32], b[32];

	printf("hmemloop-bench: %s over %s (%s)\n", b_mode->title, b_opt.prov,
	       c->fab.info->fabric_attr->prov_name);
	printf("commit: %s\n", B_COMMIT);
	cuda_lines(c);
	if (r->shim)
		printf("hmemloop: enabled (fi_write, fi_read and fi_send go "
		       "through it)\n");
	else if (b_opt.hmem)
		printf("hmemloop: not used (--no-shim): fi_write, fi_read and "
		       "fi_send are the provider's own FI_HMEM copies\n");
	else
		printf("hmemloop: not used (--no-shim): %s only\n",
		       b_mode->no_shim);
	printf("sizes %s to %s, times 4 each step; %ld latency operations a "
	       "point, one outstanding, after a warm-up, in %d turns taken "
	       "by the methods in order; a point stops early after %.1f s "
	       "(n says how many ran)\n",
	       b_size_str(b_opt.min_size, a, sizeof(a)),
	       b_size_str(b_opt.max_size, b, sizeof(b)), b_opt.iters,
	       B_LAT_TURNS, b_opt.max_time);
	printf("buffers: %s\n", b_mode->buffers);
	if (b_opt.hmem)
		printf("registered: --hmem: FI_HMEM asked for, FI_MR_HMEM set, "
		       "device buffers as FI_HMEM_CUDA with their device\n");
	else
		printf("registered: as ordinary memory, no FI_HMEM asked for, "
		       "as in libfabric issue 12328\n");
	printf("ceiling: %s\n", b_mode->ceiling);
	if (b_has(M_STAGING))
		printf("staging: copies with %s\n", b_opt.staging_sync ?
		       "cuMemcpy + legacy-stream sync" :
		       "cuMemcpyAsync + cuStreamSynchronize");
	printf("message rate, N = %d outstanding (--window):\n", b_opt.window);
	for (int m = 0; m < NMETHODS; m++)
		if (b_has(m))
			printf("  %-14s %s\n", b_mode->methods[m].name,
			       b_mode->methods[m].rate_how);
	for (int m = 0; m < NMETHODS; m++)
		if (r->shim && r->why[m][0])
			printf("%s: unavailable, skipped: %s\n",
			       b_mode->methods[m].name, r->why[m]);
	if (r->workers) {
		bool env;
		const char *async = b_setting("HMEMLOOP_ASYNC", &env);

		printf("HMEMLOOP_ASYNC: the hmemloop methods' message rates "
		       "are timed by two workers, this program started again "
		       "with HMEMLOOP_ASYNC=0 and =1, point by point between "
		       "this process's methods; their latency is this "
		       "process's (HMEMLOOP_ASYNC=%s%s)\n", async,
		       env ? "" : ", the default");
	}
	if (b_opt.mixed)
		printf("--mixed: fi_write D2D from %d endpoints of the domain, "
		       "a thread each with %d outstanding, each thread "
		       "reading only its own CQ, under HMEMLOOP_ASYNC=0 and "
		       "=1\n", B_MIX_THREADS, B_MIX_WINDOW);
	printf("\n");
}

/* The fewest latency operations among the methods measured at a size,
 * starred where --max-time cut any short. */
static void ops_cell(const struct b_results *r, int d, int s, char *b,
		     size_t len)
{
	size_t least = 0;
	bool cut = false;

	for (int m = 0; m < NMETHODS; m++) {
		const struct b_point *p = &r->p[d][m][s];

		if (p->status != P_OK)
			continue;
		if (!least || p->lat.n < least)
			least = p->lat.n;
		cut |= p->capped;
	}
	snprintf(b, len, "%zu%s", least, cut ? "*" : "");
}

static void latency_table(const struct b_results *r, int d)
{
	char sz[32], cell[48], x[16], y[16];
	int cols[MAX_COLS], ncols = columns(cols);

	printf("latency, µs: median [p99]; via: the ceiling's faster variant; "
	       "n: fewest operations measured, * where --max-time cut it\n"
	       "%9s", "size");
	for (int i = 0; i < ncols; i++)
		printf(" %19s%s", col_name(cols[i]), i ? "" : "   via");
	printf(" %7s\n", "n");
	for (int s = 0; s < r->nsizes; s++) {
		printf("%9s", b_size_str(r->sizes[s], sz, sizeof(sz)));
		for (int i = 0; i < ncols; i++) {
			const struct b_point *p = ok(r, d, cols[i], s);

			if (!p)
				snprintf(cell, sizeof(cell), "%s",
					 no_number(r, d, cols[i], s));
			else
				snprintf(cell, sizeof(cell), "%s [%s]",
					 num(p->lat.median * 1e6, x, sizeof(x)),
					 num(p->lat.p99 * 1e6, y, sizeof(y)));
			printf(" %19s", cell);
			if (cols[i] == CEIL)
				printf(" %5s", p ? via(ceil_pick(r, d, s)) : "");
		}
		ops_cell(r, d, s, cell, sizeof(cell));
		printf(" %7s\n", cell);
	}
}

static void rate_cell(const struct b_point *p, char *b, size_t len)
{
	char x[16];

	if (!p || !p->rate_ops)
		snprintf(b, len, "-");
	else
		snprintf(b, len, "%s", num(p->rate_ops / p->rate_secs / 1e3, x,
					   sizeof(x)));
}

static void bandwidth_table(const struct b_results *r, int d)
{
	char sz[32], cell[32];
	int cols[MAX_COLS], ncols = columns(cols);

	printf("bandwidth, GB/s from the median | message rate, thousand "
	       "operations/s with %d outstanding\n%9s", b_opt.window, "size");
	for (int i = 0; i < ncols; i++)
		printf(" %8.8s", col_name(cols[i]));
	printf(" |");
	for (int i = 0; i < ncols; i++)
		printf(" %8.8s", col_name(cols[i]));
	printf("\n");
	for (int s = 0; s < r->nsizes; s++) {
		printf("%9s", b_size_str(r->sizes[s], sz, sizeof(sz)));
		for (int i = 0; i < ncols; i++) {
			const struct b_point *p = ok(r, d, cols[i], s);

			printf(" %8s", p ? num(bw(p, r->sizes[s]) / 1e9, cell,
					       sizeof(cell)) :
			       no_number(r, d, cols[i], s));
		}
		printf(" |");
		for (int i = 0; i < ncols; i++) {
			rate_cell(ok(r, d, cols[i], s), cell, sizeof(cell));
			printf(" %8s", cell);
		}
		printf("\n");
	}
}

static void ratio_cells(const struct b_results *r, int d, int m, int s)
{
	const struct b_point *p = ok(r, d, m, s), *c = ok(r, d, CEIL, s);
	const struct b_point *st = ok(r, d, M_STAGING, s);
	bool stag = b_has(M_STAGING);
	char x[16];
	double diff;

	if (!p) {
		printf(" %8s %8s%s", no_number(r, d, m, s), "",
		       stag ? "         " : "");
		return;
	}
	printf(" %8s", c ? num(c->lat.median / p->lat.median, x, sizeof(x)) : "-");
	if (stag)
		printf(" %8s", st ? num(st->lat.median / p->lat.median, x,
					sizeof(x)) : "-");
	/* Two decimals while the difference is under 10 µs. */
	diff = c ? (p->lat.median - c->lat.median) * 1e6 : 0;
	if (!c)
		printf(" %8s", "-");
	else if (diff > -10 && diff < 10)
		printf(" %+8.2f", diff);
	else
		printf(" %+8.1f", diff);
}

static void ratio_table(const struct b_results *r, int d)
{
	static const int hml[] = { M_WRITE, M_READ, M_SEND };
	bool stag = b_has(M_STAGING);
	char sz[32];

	printf("hmemloop: bandwidth / ceiling's, %slatency - ceiling's (µs)\n"
	       "%9s", stag ? "bandwidth / staging's, " : "", "");
	for (int i = 0; i < 3; i++)
		printf(" %*s", stag ? 26 : 17, b_mode->methods[hml[i]].name);
	printf("\n%9s", "size");
	for (int i = 0; i < 3; i++)
		printf(" %8s%s %8s", "/ceil", stag ? "    /stag" : "", "-ceil");
	printf("\n");
	for (int s = 0; s < r->nsizes; s++) {
		printf("%9s", b_size_str(r->sizes[s], sz, sizeof(sz)));
		for (int i = 0; i < 3; i++)
			ratio_cells(r, d, hml[i], s);
		printf("\n");
	}
}

/* Operations a second: 0 where not measured. */
static double per_s(long ops, double secs)
{
	return ops > 0 && secs > 0 ? ops / secs : 0;
}

/* The ceiling's rate: the faster variant's. */
static double ceil_rate(const struct b_results *r, int d, int s)
{
	double best = 0, v;

	for (int m = M_CEIL_A; m <= M_CEIL_B; m++) {
		const struct b_point *p = &r->p[d][m][s];

		v = p->status == P_OK ? per_s(p->rate_ops, p->rate_secs) : 0;
		best = v > best ? v : best;
	}
	return best;
}

static double stag_rate(const struct b_results *r, int d, int s)
{
	const struct b_point *p = &r->p[d][M_STAGING][s];

	return b_has(M_STAGING) && p->status == P_OK ?
	       per_s(p->rate_ops, p->rate_secs) : 0;
}

/* A rate in thousands, and its share of the ceiling's, "!" after where
 * it is below staging's. */
static void async_cells(double v, double ceil, double stag)
{
	char x[16], y[16];

	if (!v) {
		printf(" %8s %7s", "-", "");
		return;
	}
	if (ceil)
		snprintf(y, sizeof(y), "%.2f%s", v / ceil,
			 stag && v < stag ? "!" : "");
	else
		snprintf(y, sizeof(y), "-");
	printf(" %8s %7s", num(v / 1e3, x, sizeof(x)), y);
}

static void async_table(const struct b_results *r, int d)
{
	static const int hml[] = { M_WRITE, M_READ, M_SEND };
	char sz[32], x[16], y[16];

	printf("message rate by HMEMLOOP_ASYNC (the workers), thousand "
	       "operations/s with %d outstanding; /ceil: share of the "
	       "ceiling's rate, ! where below staging's\n%9s %8s %8s",
	       b_opt.window, "", "", "");
	for (int i = 0; i < 3; i++)
		printf(" | %-33s", b_mode->methods[hml[i]].name);
	printf("\n%9s %8s %8s", "size", "ceiling", b_has(M_STAGING) ?
	       "staging" : "");
	for (int i = 0; i < 3; i++)
		printf(" | %8s %7s %8s %7s", "ASYNC=0", "/ceil", "ASYNC=1",
		       "/ceil");
	printf("\n");
	for (int s = 0; s < r->nsizes; s++) {
		double ceil = ceil_rate(r, d, s), stag = stag_rate(r, d, s);

		printf("%9s %8s %8s", b_size_str(r->sizes[s], sz, sizeof(sz)),
		       ceil ? num(ceil / 1e3, x, sizeof(x)) : "-",
		       stag ? num(stag / 1e3, y, sizeof(y)) : "");
		for (int i = 0; i < 3; i++) {
			const struct b_point *p = &r->p[d][hml[i]][s];

			printf(" |");
			for (int k = 0; k < 2; k++)
				async_cells(per_s(p->async_ops[k],
						  p->async_secs[k]), ceil, stag);
		}
		printf("\n");
	}
}

static void mixed_table(const struct b_results *r)
{
	char sz[32], x[16], y[16], z[16], cell[64];

	printf("== --mixed: fi_write D2D, %d endpoints, a thread each with "
	       "%d outstanding ==\nthousand operations/s, all threads "
	       "[least, most of one thread]; /ceil: share of the ceiling's "
	       "rate (%d outstanding), ! where below staging's\n%9s %8s",
	       B_MIX_THREADS, B_MIX_WINDOW, b_opt.window, "size", "ceiling");
	for (int k = 0; k < 2; k++)
		printf(" | %-15s %14s %7s", k ? "HMEMLOOP_ASYNC=1" :
		       "HMEMLOOP_ASYNC=0", "", "/ceil");
	printf("\n");
	for (int s = 0; s < r->nsizes; s++) {
		double ceil = ceil_rate(r, 0, s), stag = stag_rate(r, 0, s);

		printf("%9s %8s", b_size_str(r->sizes[s], sz, sizeof(sz)),
		       ceil ? num(ceil / 1e3, x, sizeof(x)) : "-");
		for (int k = 0; k < 2; k++) {
			const struct b_mix *m = &r->mix[k][s];
			double v = m->status == P_OK ? per_s(m->ops, m->secs) : 0;

			if (v)
				snprintf(cell, sizeof(cell), "%s [%s, %s]",
					 num(v / 1e3, x, sizeof(x)),
					 num(m->tmin / 1e3, y, sizeof(y)),
					 num(m->tmax / 1e3, z, sizeof(z)));
			else
				snprintf(cell, sizeof(cell), "%s",
					 m->status == P_SKIPPED ? "skipped" :
					 m->status == P_FAILED ? "failed" : "n/a");
			printf(" | %30s", cell);
			if (v && ceil)
				snprintf(cell, sizeof(cell), "%.2f%s", v / ceil,
					 stag && v < stag ? "!" : "");
			else
				snprintf(cell, sizeof(cell), "-");
			printf(" %7s", cell);
		}
		printf("\n");
	}
	for (int k = 0; k < 2; k++)
		for (int s = 0; s < r->nsizes; s++)
			if (r->mix[k][s].status != P_OK) {
				printf("HMEMLOOP_ASYNC=%d: %s\n", k,
				       r->mix[k][s].note);
				break;
			}
	printf("\n");
}

void b_report_tables(const struct b_results *r)
{
	for (int d = 0; d < b_mode->ndirs; d++) {
		printf("== %s (%s) ==\n", b_mode->dirs[d].title,
		       b_mode->dirs[d].name);
		latency_table(r, d);
		printf("\n");
		bandwidth_table(r, d);
		if (r->shim) {
			printf("\n");
			ratio_table(r, d);
		}
		if (r->workers) {
			printf("\n");
			async_table(r, d);
		}
		printf("\n");
	}
	if (b_opt.mixed)
		mixed_table(r);
	if (r->workers && r->held >= 0)
		printf("Sends of the rate workers: %lld found a held receive, "
		       "%lld took one back from the provider.\n", r->held,
		       r->taken_back);
	else if (r->workers)
		printf("Sends of the rate workers: held and taken-back receives "
		       "not counted (HMEMLOOP_STATS set by the run, or a worker "
		       "lost).\n");
}

static const char *status_name(enum b_status s)
{
	switch (s) {
	case P_OK: return "ok";
	case P_SKIPPED: return "skipped";
	case P_FAILED: return "failed";
	case P_UNAVAIL: return "unavailable";
	default: return "";
	}
}

/* A CSV field in quotes, inner quotes doubled. */
static void quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* rate_window, rate_ops, rate_ops_per_s, rate_Bps */
static void csv_rate(FILE *f, int window, long ops, double secs, size_t len)
{
	if (per_s(ops, secs))
		fprintf(f, "%d,%ld,%.6g,%.6g,", window, ops, per_s(ops, secs),
			per_s(ops, secs) * len);
	else
		fprintf(f, ",,,,");
}

/* rate_{sync,async}_ops_per_s, _of_ceiling, _ge_staging */
static void csv_async(FILE *f, const struct b_results *r, int d, int s,
		      double v)
{
	double ceil = ceil_rate(r, d, s), stag = stag_rate(r, d, s);

	if (!v) {
		fprintf(f, ",,,");
		return;
	}
	fprintf(f, "%.6g,", v);
	if (ceil)
		fprintf(f, "%.4f", v / ceil);
	fputc(',', f);
	if (stag)
		fprintf(f, "%d", v >= stag);
	fputc(',', f);
}

static void csv_end(FILE *f, const char *note)
{
	fprintf(f, "%s,", B_COMMIT);
	quoted(f, note);
	fputc('\n', f);
}

static void csv_row(FILE *f, const struct b_results *r, int d, int s,
		    const char *name, const struct b_point *p, const char *of)
{
	size_t len = r->sizes[s];

	fprintf(f, "%s,%s,%s,%zu,%s,", b_opt.prov, name,
		b_mode->dirs[d].name, len, status_name(p->status));
	if (p->status == P_OK)
		fprintf(f, "%zu,%d,%.4f,%.4f,%.4f,%.4f,%.6g,", p->lat.n,
			p->capped, p->lat.median * 1e6, p->lat.p99 * 1e6,
			p->lat.min * 1e6, p->lat.max * 1e6, bw(p, len));
	else
		fprintf(f, ",,,,,,,");
	csv_rate(f, b_opt.window, p->status == P_OK ? p->rate_ops : 0,
		 p->rate_secs, len);
	fprintf(f, "%s,", of);
	for (int k = 0; k < 2; k++)
		csv_async(f, r, d, s, p->status == P_OK ?
			  per_s(p->async_ops[k], p->async_secs[k]) : 0);
	fprintf(f, ",,,,,");
	csv_end(f, p->note);
}

/* --mixed's row at size s: the plain rate columns are the environment's
 * setting's, as for the other hmemloop methods. */
static void csv_mix(FILE *f, const struct b_results *r, int s)
{
	const struct b_mix *x = r->mix[b_env_async()];
	char note[2 * sizeof(x->note) + 40] = "";
	enum b_status st = P_OK;

	for (int k = 0; k < 2; k++) {
		if (r->mix[k][s].status == P_OK)
			continue;
		st = st == P_OK ? r->mix[k][s].status : st;
		snprintf(note + strlen(note), sizeof(note) - strlen(note),
			 "%sHMEMLOOP_ASYNC=%d: %s", note[0] ? "; " : "", k,
			 r->mix[k][s].note);
	}
	fprintf(f, "%s,mixed_fi_write,%s,%zu,%s,,,,,,,,", b_opt.prov,
		b_mode->dirs[0].name, r->sizes[s], status_name(st));
	csv_rate(f, B_MIX_WINDOW, x[s].ops, x[s].secs, r->sizes[s]);
	fprintf(f, ",");
	for (int k = 0; k < 2; k++)
		csv_async(f, r, 0, s, per_s(r->mix[k][s].ops,
					    r->mix[k][s].secs));
	fprintf(f, "%d,", B_MIX_THREADS);
	for (int k = 0; k < 2; k++) {
		x = &r->mix[k][s];
		if (x->status == P_OK)
			fprintf(f, "%.6g,%.6g,", x->tmin, x->tmax);
		else
			fprintf(f, ",,");
	}
	csv_end(f, note);
}

int b_report_csv(const struct b_results *r, const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		perror(path);
		return -1;
	}
	fprintf(f, "provider,method,direction,size,status,lat_ops,lat_capped,"
		"lat_median_us,lat_p99_us,lat_min_us,lat_max_us,bw_Bps,"
		"rate_window,rate_ops,rate_ops_per_s,rate_Bps,ceiling_of,"
		"rate_sync_ops_per_s,rate_sync_of_ceiling,rate_sync_ge_staging,"
		"rate_async_ops_per_s,rate_async_of_ceiling,"
		"rate_async_ge_staging,mix_threads,"
		"mix_sync_thread_min_ops_per_s,mix_sync_thread_max_ops_per_s,"
		"mix_async_thread_min_ops_per_s,mix_async_thread_max_ops_per_s,"
		"commit,note\n");
	for (int d = 0; d < b_mode->ndirs; d++) {
		for (int s = 0; s < r->nsizes; s++) {
			int pick = ceil_pick(r, d, s);

			if (pick >= 0)
				csv_row(f, r, d, s, "ceiling", &r->p[d][pick][s],
					b_mode->methods[pick].name);
			for (int m = 0; m < NMETHODS; m++)
				if (r->p[d][m][s].status != P_NONE)
					csv_row(f, r, d, s,
						b_mode->methods[m].name,
						&r->p[d][m][s], "");
		}
	}
	for (int s = 0; b_opt.mixed && s < r->nsizes; s++)
		csv_mix(f, r, s);
	if (fclose(f)) {
		perror(path);
		return -1;
	}
	printf("CSV: %s\n", path);
	return 0;
}
