/*
 * clirun.c - what one invocation of a command costs: run it N times in
 * sequence, time each from spawn to exit, and read the child's peak RSS.
 *
 *   clirun -n 1000 [-w 20] [-i STDIN_FILE] [-l LABEL] -- CMD ARGS...
 *
 * The command's stdout and stderr go to /dev/null, its stdin comes from
 * STDIN_FILE (or /dev/null).  posix_spawn, not a shell, so nothing but
 * the command is timed.  Peak RSS is wait4's ru_maxrss, the figure
 * /usr/bin/time -v prints; with posix_spawn it never reads below clirun's
 * own ~1.3 MiB, which only matters for `true`.  Prints one
 * "RESULT mode=cli label=LABEL ..." line; exit status 2 if any run failed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "stats.h"

extern char **environ;

struct sample {
	int64_t wall_ns;
	long rss_kb;
	int ok;
};

static struct sample run_once(char **cmd, const char *in)
{
	posix_spawn_file_actions_t fa;
	struct sample s = { 0 };
	struct rusage ru;
	int64_t t0;
	pid_t pid;
	int status;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, in ? in : "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	t0 = now_ns();
	if (posix_spawnp(&pid, cmd[0], &fa, NULL, cmd, environ) != 0) {
		perror(cmd[0]);
		exit(1);
	}
	wait4(pid, &status, 0, &ru);
	s.wall_ns = now_ns() - t0;
	posix_spawn_file_actions_destroy(&fa);
	s.rss_kb = ru.ru_maxrss;
	s.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	return s;
}

static int usage(void)
{
	fprintf(stderr, "usage: clirun -n RUNS [-w WARMUP] [-i STDIN_FILE] [-l LABEL] -- CMD ARGS...\n");
	return 64;
}

int main(int argc, char **argv)
{
	long runs = 1000, warmup = 20, failures = 0;
	const char *in = NULL, *label = "cmd";
	int64_t *wall, *rss, sum = 0, t_all;
	char **cmd;
	int ch;

	while ((ch = getopt(argc, argv, "n:w:i:l:")) != -1) {
		switch (ch) {
		case 'n': runs = atol(optarg); break;
		case 'w': warmup = atol(optarg); break;
		case 'i': in = optarg; break;
		case 'l': label = optarg; break;
		default: return usage();
		}
	}
	if (optind >= argc || runs < 1)
		return usage();
	cmd = argv + optind;
	wall = calloc((size_t)runs, sizeof(int64_t));
	rss = calloc((size_t)runs, sizeof(int64_t));
	if (!wall || !rss)
		return 1;

	/* Warm-up runs fill the page cache and are not counted. */
	t_all = now_ns();
	for (long i = 0; i < warmup; i++)
		run_once(cmd, in);
	for (long i = 0; i < runs; i++) {
		struct sample s = run_once(cmd, in);

		wall[i] = s.wall_ns;
		rss[i] = s.rss_kb;
		sum += s.wall_ns;
		failures += !s.ok;
	}
	t_all = now_ns() - t_all;

	sort_samples(wall, runs);
	sort_samples(rss, runs);
	printf("RESULT mode=cli label=%s runs=%ld median_ms=%.3f p95_ms=%.3f min_ms=%.3f max_ms=%.3f"
	       " mean_ms=%.3f rss_med_kb=%lld rss_max_kb=%lld failures=%ld total_s=%.2f\n",
	       label, runs, (double)percentile(wall, runs, 0.5) / 1e6,
	       (double)percentile(wall, runs, 0.95) / 1e6,
	       (double)wall[0] / 1e6, (double)wall[runs - 1] / 1e6,
	       (double)sum / (double)runs / 1e6,
	       (long long)percentile(rss, runs, 0.5), (long long)rss[runs - 1], failures,
	       ns_to_s(t_all));
	return failures ? 2 : 0;
}
