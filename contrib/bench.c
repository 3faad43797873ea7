/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hmemloop-bench: what hmemloop's same-process device copies cost against
 * the CUDA driver's own copy and against staging through host memory
 * (mode 1, run under the hmemloop wrapper; --cross: between two GPUs),
 * what hmemloop costs the traffic it passes through (mode 2,
 * --passthrough), and device memory between two processes through a
 * provider (--peers). docs/bench.md says how to read the output.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		b_die("bad size '%s'", s);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end || !v)
		b_die("bad size '%s'", s);
	return v;
}

static void parse_sizes(const char *s)
{
	char buf[64], *colon;

	snprintf(buf, sizeof(buf), "%s", s);
	colon = strchr(buf, ':');
	if (!colon)
		b_die("--sizes wants MIN:MAX, got '%s'", s);
	*colon = '\0';
	b_opt.min_size = parse_size(buf);
	b_opt.max_size = parse_size(colon + 1);
	if (b_opt.min_size > b_opt.max_size)
		b_die("--sizes: MIN is larger than MAX");
}

static long parse_long(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v <= 0)
		b_die("%s wants a positive number, got '%s'", what, s);
	return v;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage:\n"
"  hmemloop hmemloop-bench [-p PROVIDER] [--sizes MIN:MAX] [--iters N]\n"
"                          [--max-time S] [--csv FILE] [--quick]\n"
"                          [--staging-copy async|sync] [--hmem]\n"
"                          [--window N] [--mixed]\n"
"  hmemloop-bench --no-shim [same options]\n"
"  hmemloop hmemloop-bench --cross [-p PROVIDER] [--sizes MIN:MAX]\n"
"                          [--iters N] [--max-time S] [--csv FILE] [--quick]\n"
"                          [--window N]\n"
"  hmemloop-bench --passthrough [-p PROVIDER]... [--runs N] [--iters N]\n"
"                 [--msg-size N] [--lib PATH] [--csv FILE] [--quick]\n"
"                 [--own-address]\n"
"  hmemloop hmemloop-bench --peers [-p PROVIDER]... [--sizes MIN:MAX]\n"
"                 [--iters N] [--max-time S] [--csv FILE] [--quick] [--host]\n"
"\n"
"Mode 1 (default) times same-process copies of CUDA device memory: the\n"
"CUDA driver's own copy (the ceiling), fi_write, fi_read and fi_send\n"
"through hmemloop, and staging through pinned host memory. It must run\n"
"under the hmemloop wrapper; --no-shim runs the ceiling and staging only.\n"
"The hmemloop methods' message rates are measured twice, by two copies\n"
"of this program started with HMEMLOOP_ASYNC=0 (each call waits for its\n"
"copy) and HMEMLOOP_ASYNC=1 (completions reported once the copies land).\n"
"  -p, --provider PROV  provider (default shm)\n"
"  --sizes MIN:MAX      sizes, MIN times powers of 4, and MAX (default 8:1G)\n"
"  --iters N            latency operations a point (default 1000)\n"
"  --max-time S         seconds a point may take before fewer operations\n"
"                       are measured (default 1)\n"
"  --csv FILE           one row per method, direction and size\n"
"  --quick              smoke run: --sizes 8:4096 --iters 20\n"
"  --staging-copy K     staging copies: async (cuMemcpyAsync on a stream,\n"
"                       default) or sync (cuMemcpy)\n"
"  --hmem               ask the provider for FI_HMEM and register device\n"
"                       buffers as FI_HMEM_CUDA: with --no-shim, fi_write,\n"
"                       fi_read and fi_send are the provider's own copies\n"
"  --window N           operations outstanding for the message rate\n"
"                       (default 64)\n"
"  --mixed              also fi_write D2D from 4 endpoints, a thread each\n"
"                       with 16 outstanding, at every size, under\n"
"                       HMEMLOOP_ASYNC=0 and =1\n"
"\n"
"--cross times the same between a buffer on GPU 0 and one on GPU 1, both\n"
"ways: the ceiling is the faster of cuMemcpyPeerAsync and cuMemcpyAsync,\n"
"with peer access enabled; fi_write, fi_read and fi_send through hmemloop;\n"
"no staging. With fewer than two devices it exits 77.\n"
"\n"
"Mode 2 (--passthrough) times host-memory traffic between two processes\n"
"without hmemloop, with it preloaded but disabled, and enabled.\n"
"  -p PROV              provider, may repeat (default tcp;ofi_rxm and shm)\n"
"  --runs N             process pairs per configuration (default 5)\n"
"  --iters N            ping-pong round trips a run (default 10000)\n"
"  --msg-size N         message and write size (default 64)\n"
"  --lib PATH           libhmemloop.so (default: found near this program)\n"
"  --own-address        each endpoint's own address in its AV too, as MPI\n"
"                       puts it there: hmemloop records its receives\n"
"\n"
"--peers times device memory between two processes on GPU 0, issue\n"
"12328's application (FI_MR_HMEM without FI_HMEM: HMEMLOOP_HMEM=auto asks\n"
"for FI_HMEM): fi_write, fi_read and fi_send from this process to a child,\n"
"through each -p provider (default shm) and tcp;ofi_rxm, against\n"
"cuMemcpyAsync between the two buffers through a CUDA IPC handle. A\n"
"provider that cannot register CUDA memory here is reported unavailable.\n"
"  --host               host buffers instead: the same transfers, no device\n");
}

enum {
	OPT_SIZES = 256, OPT_ITERS, OPT_CSV, OPT_QUICK, OPT_NO_SHIM,
	OPT_PASS, OPT_RUNS, OPT_LIB, OPT_MAX_TIME, OPT_MSG_SIZE,
	OPT_STAGING, OPT_CHILD, OPT_CROSS, OPT_HMEM, OPT_PEERS,
	OPT_PEERS_CHILD, OPT_HOST, OPT_WINDOW, OPT_MIXED, OPT_WORKER,
	OPT_OWN,
};

static const struct option long_opts[] = {
	{ "provider", required_argument, NULL, 'p' },
	{ "sizes", required_argument, NULL, OPT_SIZES },
	{ "iters", required_argument, NULL, OPT_ITERS },
	{ "csv", required_argument, NULL, OPT_CSV },
	{ "quick", no_argument, NULL, OPT_QUICK },
	{ "no-shim", no_argument, NULL, OPT_NO_SHIM },
	{ "passthrough", no_argument, NULL, OPT_PASS },
	{ "cross", no_argument, NULL, OPT_CROSS },
	{ "runs", required_argument, NULL, OPT_RUNS },
	{ "lib", required_argument, NULL, OPT_LIB },
	{ "max-time", required_argument, NULL, OPT_MAX_TIME },
	{ "msg-size", required_argument, NULL, OPT_MSG_SIZE },
	{ "staging-copy", required_argument, NULL, OPT_STAGING },
	{ "hmem", no_argument, NULL, OPT_HMEM },
	{ "pp-child", required_argument, NULL, OPT_CHILD },
	{ "peers", no_argument, NULL, OPT_PEERS },
	{ "peers-child", required_argument, NULL, OPT_PEERS_CHILD },
	{ "host", no_argument, NULL, OPT_HOST },
	{ "window", required_argument, NULL, OPT_WINDOW },
	{ "mixed", no_argument, NULL, OPT_MIXED },
	{ "rate-worker", required_argument, NULL, OPT_WORKER },
	{ "own-address", no_argument, NULL, OPT_OWN },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void parse_opt(int c, const char *arg, bool *sizes, bool *iters,
		      bool *window)
{
	switch (c) {
	case 'p':
		if (b_opt.nprovs == 8)
			b_die("too many -p");
		b_opt.provs[b_opt.nprovs++] = arg;
		b_opt.prov = arg;
		break;
	case OPT_SIZES: parse_sizes(arg); *sizes = true; break;
	case OPT_ITERS:
		b_opt.iters = parse_long(arg, "--iters");
		*iters = true;
		break;
	case OPT_CSV: b_opt.csv = arg; break;
	case OPT_QUICK: b_opt.quick = true; break;
	case OPT_NO_SHIM: b_opt.no_shim = true; break;
	case OPT_PASS: b_opt.passthrough = true; break;
	case OPT_CROSS: b_opt.cross = true; break;
	case OPT_RUNS: b_opt.runs = (int) parse_long(arg, "--runs"); break;
	case OPT_LIB: b_opt.lib = arg; break;
	case OPT_MAX_TIME:
		b_opt.max_time = atof(arg);
		if (b_opt.max_time <= 0)
			b_die("--max-time wants seconds, got '%s'", arg);
		break;
	case OPT_MSG_SIZE: b_opt.msg_size = parse_size(arg); break;
	case OPT_STAGING:
		if (strcmp(arg, "sync") && strcmp(arg, "async"))
			b_die("--staging-copy wants async or sync");
		b_opt.staging_sync = !strcmp(arg, "sync");
		break;
	case OPT_CHILD: b_opt.child_role = arg; break;
	case OPT_OWN: b_opt.own_address = true; break;
	case OPT_HMEM: b_opt.hmem = true; break;
	case OPT_PEERS: b_opt.peers = true; break;
	case OPT_PEERS_CHILD: b_opt.peers_child = arg; break;
	case OPT_HOST: b_opt.host = true; break;
	case OPT_WINDOW:
		b_opt.window = (int) parse_long(arg, "--window");
		if (b_opt.window > B_MAX_WINDOW)
			b_die("--window: at most %d", B_MAX_WINDOW);
		*window = true;
		break;
	case OPT_MIXED: b_opt.mixed = true; break;
	case OPT_WORKER: b_opt.worker = !strcmp(arg, "1"); break;
	case 'h': usage(stdout); exit(0);
	default: usage(stderr); exit(2);
	}
}

int main(int argc, char **argv)
{
	bool sizes = false, iters = false, window = false;
	int c;

	b_settings_load();
	while ((c = getopt_long(argc, argv, "p:h", long_opts, NULL)) != -1)
		parse_opt(c, optarg, &sizes, &iters, &window);
	if (optind < argc)
		b_die("unexpected argument '%s' (--help for usage)",
		      argv[optind]);
	if (b_opt.child_role)
		return b_pass_child();
	if (b_opt.peers_child)
		return b_peers_child();
	if (b_opt.worker >= 0)
		return b_worker_main();
	if (b_opt.passthrough + b_opt.cross + b_opt.peers > 1)
		b_die("--cross, --passthrough and --peers are different modes");
	if (window && (b_opt.passthrough || b_opt.peers))
		b_die("--window is for mode 1 and --cross");
	if (b_opt.mixed && (b_opt.passthrough || b_opt.peers || b_opt.cross))
		b_die("--mixed is for mode 1 only");
	if (b_opt.mixed && b_opt.no_shim)
		b_die("--mixed times hmemloop: not with --no-shim");
	if (b_opt.passthrough) {
		if (!iters)
			b_opt.iters = b_opt.quick ? 1000 : 10000;
		return b_pass_main(argv);
	}
	if (b_opt.quick && !sizes)
		parse_sizes("8:4096");
	if (b_opt.quick && !iters)
		b_opt.iters = 20;
	if (b_opt.peers)
		return b_peers_main();
	if (!b_opt.prov)
		b_opt.prov = "shm";
	if (b_opt.nprovs > 1)
		b_die("mode 1 takes one provider");
	return b_device_main();
}
