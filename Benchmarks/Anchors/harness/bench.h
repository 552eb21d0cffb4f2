/*
 * bench.h - what the modes of bench share: the options of the run, the
 * subscriber side, and one entry point per mode.
 */
#ifndef ANCHORS_BENCH_H
#define ANCHORS_BENCH_H

#include <stdint.h>

#include "conn.h"

/* Read buffer of a measuring connection: room for many frames per read. */
#define READ_BUF (256 * 1024)

struct options {
	const struct proto *proto;
	const char *addr;
	const char *topic;
	const char *message;     /* pub1: the text published                  */
	const char *ready_file;  /* listen: created once subscribed           */
	long n;                  /* messages, or topics (fill)                */
	long size;               /* payload bytes, >= PAYLOAD_MIN             */
	long conns;              /* subscribers, or idle connections          */
	long window;             /* max messages ahead of the slowest
	                            subscriber, 0 = no limit                  */
	long batch;              /* bytes per publisher write()               */
	long warmup;             /* latency: messages not recorded            */
	double timeout;          /* hard limit of the whole run (s)           */
	double quiet;            /* throughput: give up after this long
	                            without a delivery (s)                    */
	double hold;             /* idle, fill: wait before reading RSS (s)   */
	int server_pid;          /* 0: no server statistics                   */
	int echo_cpu;            /* floor: CPU of the echo process, -1 = any  */
};

extern struct options opt;

/* bench.c: a client id unique on this machine ("b<pid>-<role><i>"), and
 * the server's CPU seconds and RSS (-1 without -p). */
void client_id(char *out, size_t cap, const char *role, long i);
double server_cpu_s(void);
long server_rss_kb(void);

/* subscriber.c: what a subscriber does with each delivered message. */
void on_ignore(conn_t *c, const char *payload, size_t len);
void on_count(conn_t *c, const char *payload, size_t len);
void on_message(conn_t *c, const char *payload, size_t len);
void on_timed(conn_t *c, const char *payload, size_t len);

/* Open `count` subscribers of opt.proto at opt.addr, each on its own
 * connection, subscribed to `topic` and confirmed by the server. */
int open_subscribers(conn_t *subs, long count, const char *topic, deliver_fn fn);

/* The modes; each prints one RESULT line and returns the exit status. */
int run_throughput(void);
int run_latency(void);
int run_floor(void);
int run_idle(void);
int run_fill(void);
int run_listen(void);
int run_pub1(void);

#endif
