/*
 * mode_throughput.c - how fast a server fans messages out.
 *
 * opt.conns subscribers, each on its own connection, subscribe to one
 * topic; one publisher connection pipelines opt.n messages of opt.size
 * bytes in ~opt.batch-byte writes.  With opt.window > 0 the publisher stays
 * at most that many messages ahead of the slowest subscriber (paced); with
 * 0 the servers' own buffering and slow-consumer policies decide
 * (firehose).
 *
 * One thread and one epoll loop serve the publisher and every subscriber,
 * so the harness uses at most one core; the RESULT line says how much CPU
 * it and the server used, so it shows which side was the bottleneck.
 *
 * Reported: pub_rate (messages handed to the socket per second, from the
 * first publish to the last byte written: kernel and server buffering
 * included), deliv_rate (all deliveries to all subscribers per second, to
 * the moment the last subscriber has the last message), msg_rate (messages
 * that reached every subscriber, per second), lost, gaps, errors, and the
 * CPU seconds of the server (all threads) and of the harness.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "batch.h"
#include "bench.h"
#include "clock.h"
#include "procstat.h"

struct run {
	conn_t *subs, pub;
	long nsubs;
	char *finished;        /* per subscriber: counted in `done`      */
	long done, dead;       /* subscribers finished / disconnected    */
	struct batch b;
	uint64_t expected;     /* messages to publish = to each subscriber */
	uint64_t next;         /* next sequence number to put in a batch  */
	uint64_t sent;         /* messages written whole                  */
	int64_t t_pub_done;    /* when the last byte was written          */
	int64_t t_progress;    /* the latest delivery (or the start)      */
	int ep;
	int pub_wants_out;     /* EPOLLOUT requested for the publisher    */
};

/* Paced runs: is the publisher a whole window ahead of the slowest
 * subscriber still connected? */
static int window_full(const struct run *r)
{
	uint64_t slowest = r->expected;

	if (opt.window <= 0)
		return 0;
	for (long i = 0; i < r->nsubs; i++)
		if (r->subs[i].fd >= 0 && r->subs[i].count < slowest)
			slowest = r->subs[i].count;
	return r->next - slowest >= (uint64_t)opt.window;
}

/*
 * The publisher's share of one turn of the loop: up to four writes,
 * refilling the batch while the window allows.  Returns 1 if it wrote, 0
 * if it has nothing to write now, -1 if the socket is full, -2 on error.
 */
static int publish_some(struct run *r)
{
	struct batch *b = &r->b;
	int state = 0;

	for (int round = 0; round < 4; round++) {
		if (b->pos == b->len && r->next < r->expected) {
			size_t count = b->frames;

			if (window_full(r))
				break;
			if (count > r->expected - r->next)
				count = (size_t)(r->expected - r->next);
			batch_fill(b, r->next, count);
			r->next += count;
		}
		if (b->pos == b->len)
			break;
		ssize_t w = write(r->pub.fd, b->buf + b->pos, b->len - b->pos);
		if (w < 0 && errno == EAGAIN)
			return -1;
		if (w < 0) {
			perror("publisher write");
			return -2;
		}
		b->pos += (size_t)w;
		if (b->pos == b->len) {
			r->sent = r->next;
			if (r->sent == r->expected)
				r->t_pub_done = now_ns();
		}
		state = 1;
	}
	return state;
}

/* Ask epoll for the publisher's writability only while its socket is
 * full: otherwise every wait would return at once. */
static void want_writable(struct run *r, int want)
{
	struct epoll_event ev = { .events = EPOLLIN | (want ? EPOLLOUT : 0) };

	if (want == r->pub_wants_out)
		return;
	r->pub_wants_out = want;
	ev.data.ptr = &r->pub;
	epoll_ctl(r->ep, EPOLL_CTL_MOD, r->pub.fd, &ev);
}

/* A subscriber is readable: up to eight reads, then the others' turn. */
static void read_subscriber(struct run *r, conn_t *c)
{
	uint64_t before = c->count;

	for (int i = 0; i < 8; i++) {
		ssize_t got = conn_pump(c, on_message);

		if (got > 0)
			continue;
		if (got == 0 || got == -2) {
			fprintf(stderr, "%s: subscriber disconnected after %llu messages\n",
				opt.proto->name, (unsigned long long)c->count);
			epoll_ctl(r->ep, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
			c->fd = -1;
			r->dead++;
		}
		break;
	}
	if (c->count != before)
		r->t_progress = now_ns();
	if (c->done_ns && !r->finished[c - r->subs]) {
		r->finished[c - r->subs] = 1;
		r->done++;
	}
}

static int watch(int ep, conn_t *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	return epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static int setup(struct run *r)
{
	char id[64];

	r->nsubs = opt.conns;
	r->expected = (uint64_t)opt.n;
	r->subs = calloc((size_t)r->nsubs, sizeof(conn_t));
	r->finished = calloc((size_t)r->nsubs, 1);
	if (!r->subs || !r->finished)
		return -1;
	if (open_subscribers(r->subs, r->nsubs, opt.topic, on_message) < 0)
		return -1;
	for (long i = 0; i < r->nsubs; i++)
		r->subs[i].expected = r->expected;
	client_id(id, sizeof(id), "p", 0);
	if (conn_open(&r->pub, opt.proto, opt.addr, id, READ_BUF) < 0)
		return -1;
	if (batch_init(&r->b, opt.proto, opt.topic, (size_t)opt.size, (size_t)opt.batch) < 0)
		return -1;
	r->ep = epoll_create1(0);
	if (r->ep < 0)
		return -1;
	for (long i = 0; i < r->nsubs; i++)
		watch(r->ep, &r->subs[i]);
	watch(r->ep, &r->pub);
	return 0;
}

int run_throughput(void)
{
	struct run r = { 0 };
	struct epoll_event evs[128];
	uint64_t total = 0, gaps = 0, errors = 0, lost;
	uint64_t everyone = UINT64_MAX;   /* messages that reached every subscriber */
	int64_t t0, t_end, deadline;
	double cpu0, bcpu0, cpu;

	if (setup(&r) < 0)
		return 1;

	cpu0 = server_cpu_s();
	bcpu0 = self_cpu_s();
	t0 = r.t_progress = now_ns();
	deadline = t0 + (int64_t)(opt.timeout * 1e9);

	while (r.done + r.dead < r.nsubs) {
		int wrote = publish_some(&r), n;
		int64_t now;

		if (wrote == -2)
			return 1;
		want_writable(&r, wrote == -1);
		/* Don't sleep while the publisher can write more. */
		n = epoll_wait(r.ep, evs, 128, wrote == 1 ? 0 : 50);
		for (int i = 0; i < n; i++) {
			conn_t *c = evs[i].data.ptr;

			if (c != &r.pub)
				read_subscriber(&r, c);
			else if (evs[i].events & EPOLLIN)   /* replies we drop */
				while (conn_pump(&r.pub, on_ignore) > 0)
					;
		}

		now = now_ns();
		if (now > deadline) {
			fprintf(stderr, "%s: run time limit reached\n", opt.proto->name);
			break;
		}
		if (r.sent == r.expected && now - r.t_progress > (int64_t)(opt.quiet * 1e9)) {
			fprintf(stderr, "%s: no delivery for %.1f s, giving up\n",
				opt.proto->name, opt.quiet);
			break;
		}
	}

	t_end = t0;
	for (long i = 0; i < r.nsubs; i++) {
		const conn_t *s = &r.subs[i];

		if (s->count < everyone)
			everyone = s->count;
		total += s->count;
		gaps += s->gaps;
		errors += s->errors;
		if (s->done_ns > t_end)
			t_end = s->done_ns;
	}
	/* Some never finished: the run ended with the last delivery seen. */
	if (r.done < r.nsubs)
		t_end = r.t_progress;
	lost = r.expected * (uint64_t)r.nsubs - total;
	if (!r.t_pub_done)
		r.t_pub_done = now_ns();

	cpu = server_cpu_s();
	printf("RESULT proto=%s mode=throughput subs=%ld msgs=%ld payload=%ld window=%ld"
	       " pub_rate=%.0f deliv_rate=%.0f msg_rate=%.0f elapsed_s=%.3f pub_s=%.3f"
	       " delivered=%llu lost=%llu gaps=%llu errors=%llu"
	       " srv_cpu_s=%.2f bench_cpu_s=%.2f\n",
	       opt.proto->name, r.nsubs, opt.n, opt.size, opt.window,
	       (double)r.sent / ns_to_s(r.t_pub_done - t0),
	       (double)total / ns_to_s(t_end - t0),
	       (double)everyone / ns_to_s(t_end - t0),
	       ns_to_s(t_end - t0), ns_to_s(r.t_pub_done - t0),
	       (unsigned long long)total, (unsigned long long)lost,
	       (unsigned long long)gaps, (unsigned long long)errors,
	       cpu >= 0 && cpu0 >= 0 ? cpu - cpu0 : -1, self_cpu_s() - bcpu0);

	for (long i = 0; i < r.nsubs; i++)
		if (r.subs[i].fd >= 0)
			conn_close(&r.subs[i]);
	conn_close(&r.pub);
	close(r.ep);
	batch_free(&r.b);
	free(r.subs);
	free(r.finished);
	return lost ? 2 : 0;
}
