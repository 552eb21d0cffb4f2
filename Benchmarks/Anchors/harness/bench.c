/*
 * bench.c - a pub/sub load generator that drives Redis, Mosquitto, NATS
 * and notifyd each through its own wire protocol.
 *
 *   bench throughput -P redis -n 1000000 -s 16 -c 16 -w 262144 -p SERVER_PID
 *   bench latency    -P mqtt  -n 20000 -s 16 -p SERVER_PID
 *   bench floor      -n 20000 -s 16 [-C CPU]       (no server: echo process)
 *   bench idle       -P nats  -a tcp:127.0.0.1:4222 -c 1000 -p SERVER_PID
 *   bench fill       -P notifyd -n 100000 -s 16 -p SERVER_PID
 *   bench listen     -P redis -t t -n 1000 -T 60 [-r READY_FILE]
 *   bench pub1       -P redis -t t -m hello
 *
 * Each run prints one line "RESULT key=value ..." on stdout; errors go to
 * stderr.  The modes are in mode_*.c, the protocols in proto_*.c; this
 * file holds the options and what every mode shares.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "payload.h"
#include "procstat.h"

static const struct proto *const protocols[] = {
	&proto_redis,
	&proto_mqtt,
	&proto_nats,
	&proto_notifyd,
};

static const struct mode {
	const char *name;
	int (*run)(void);
	int needs_server;
} modes[] = {
	{ "throughput", run_throughput, 1 },
	{ "latency", run_latency, 1 },
	{ "floor", run_floor, 0 },
	{ "idle", run_idle, 1 },
	{ "fill", run_fill, 1 },
	{ "listen", run_listen, 1 },
	{ "pub1", run_pub1, 1 },
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct options opt = {
	.topic = "bench",
	.n = 100000,
	.size = 16,
	.conns = 1,
	.batch = 64 * 1024,
	.warmup = 1000,
	.timeout = 120,
	.quiet = 3,
	.hold = 1,
	.echo_cpu = -1,
};

void client_id(char *out, size_t cap, const char *role, long i)
{
	/* The pid keeps ids apart between runs that overlap (listen and
	 * pub1 in the CLI phase): MQTT brokers drop the older of two
	 * connections with the same id. */
	snprintf(out, cap, "b%d-%s%ld", (int)getpid(), role, i);
}

double server_cpu_s(void)
{
	return opt.server_pid ? proc_cpu_s(opt.server_pid) : -1;
}

long server_rss_kb(void)
{
	return opt.server_pid ? proc_rss_kb(opt.server_pid) : -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench MODE -P PROTO [options]\n"
		"modes: throughput latency floor idle fill listen pub1\n"
		"  -P PROTO   redis | mqtt | nats | notifyd\n"
		"  -a ADDR    unix:/path or tcp:host:port (default per protocol)\n"
		"  -n N       messages (throughput, latency, listen) or topics (fill)\n"
		"  -s BYTES   payload size, at least 16 (default 16)\n"
		"  -c N       subscribers (throughput, latency) or connections (idle)\n"
		"  -w N       throughput: max messages ahead of the slowest subscriber\n"
		"             (0 = no limit, the default)\n"
		"  -b BYTES   throughput: bytes per publisher write (default 65536)\n"
		"  -W N       latency: warm-up messages, not recorded (default 1000)\n"
		"  -T SEC     hard time limit of the run (default 120)\n"
		"  -q SEC     throughput: give up after SEC without deliveries (default 3)\n"
		"  -H SEC     idle/fill: wait before reading the server RSS (default 1)\n"
		"  -p PID     server process, for its RSS and CPU time\n"
		"  -t TOPIC   topic (default \"bench\"; idle/fill use TOPIC-i)\n"
		"  -m TEXT    pub1: message text\n"
		"  -r FILE    listen: create FILE once subscribed\n"
		"  -C CPU     floor: pin the echo process to CPU\n");
	exit(64);
}

static const struct proto *find_proto(const char *name)
{
	for (size_t i = 0; i < COUNT(protocols); i++)
		if (strcmp(name, protocols[i]->name) == 0)
			return protocols[i];
	fprintf(stderr, "unknown protocol %s\n", name);
	usage();
	return NULL;
}

static const struct mode *find_mode(const char *name)
{
	for (size_t i = 0; i < COUNT(modes); i++)
		if (strcmp(name, modes[i].name) == 0)
			return &modes[i];
	usage();
	return NULL;
}

static void parse_options(int argc, char **argv)
{
	int ch;

	optind = 2;     /* argv[1] is the mode */
	while ((ch = getopt(argc, argv, "P:a:n:s:c:w:b:W:T:q:H:p:t:m:r:C:")) != -1) {
		switch (ch) {
		case 'P': opt.proto = find_proto(optarg); break;
		case 'a': opt.addr = optarg; break;
		case 'n': opt.n = atol(optarg); break;
		case 's': opt.size = atol(optarg); break;
		case 'c': opt.conns = atol(optarg); break;
		case 'w': opt.window = atol(optarg); break;
		case 'b': opt.batch = atol(optarg); break;
		case 'W': opt.warmup = atol(optarg); break;
		case 'T': opt.timeout = atof(optarg); break;
		case 'q': opt.quiet = atof(optarg); break;
		case 'H': opt.hold = atof(optarg); break;
		case 'p': opt.server_pid = atoi(optarg); break;
		case 't': opt.topic = optarg; break;
		case 'm': opt.message = optarg; break;
		case 'r': opt.ready_file = optarg; break;
		case 'C': opt.echo_cpu = atoi(optarg); break;
		default: usage();
		}
	}
}

int main(int argc, char **argv)
{
	const struct mode *mode;

	if (argc < 2)
		usage();
	mode = find_mode(argv[1]);
	parse_options(argc, argv);
	if (mode->needs_server && !opt.proto)
		usage();
	if (opt.n < 1 || opt.size < PAYLOAD_MIN || opt.conns < 1)
		usage();
	if (mode->run == run_pub1 && !opt.message)
		usage();
	if (opt.proto && !opt.addr)
		opt.addr = opt.proto->default_addr;
	return mode->run();
}
