#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

static struct {
	void *h;
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	const char *(*get_device_name)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *);
	int (*destroy_comp_channel)(struct ibv_comp_channel *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
	int (*destroy_cq)(struct ibv_cq *);
	int (*get_cq_event)(struct ibv_comp_channel *, struct ibv_cq **, void **);
	void (*ack_cq_events)(struct ibv_cq *, unsigned int);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	int (*destroy_qp)(struct ibv_qp *);
	int (*fork_init)(void);
	enum ibv_fork_status (*is_fork_initialized)(void);
	const char *(*wc_status_str)(enum ibv_wc_status);
} L;

#define SYM(field, name)                                   \
	do {                                               \
		*(void **)(&L.field) = dlsym(L.h, name);   \
		if (!L.field) return "symbol " name " missing"; \
	} while (0)

const char *gt_load(const char *name) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) return "dlopen failed";
	if (L.h) { // loaded already
		dlclose(h);
		return NULL;
	}
	L.h = h;
	SYM(get_device_list, "ibv_get_device_list");
	SYM(free_device_list, "ibv_free_device_list");
	SYM(get_device_name, "ibv_get_device_name");
	SYM(open_device, "ibv_open_device");
	SYM(close_device, "ibv_close_device");
	SYM(query_device, "ibv_query_device");
	SYM(query_port, "ibv_query_port");
	SYM(query_gid, "ibv_query_gid");
	SYM(alloc_pd, "ibv_alloc_pd");
	SYM(dealloc_pd, "ibv_dealloc_pd");
	SYM(reg_mr, "ibv_reg_mr");
	SYM(dereg_mr, "ibv_dereg_mr");
	SYM(create_comp_channel, "ibv_create_comp_channel");
	SYM(destroy_comp_channel, "ibv_destroy_comp_channel");
	SYM(create_cq, "ibv_create_cq");
	SYM(destroy_cq, "ibv_destroy_cq");
	SYM(get_cq_event, "ibv_get_cq_event");
	SYM(ack_cq_events, "ibv_ack_cq_events");
	SYM(create_qp, "ibv_create_qp");
	SYM(modify_qp, "ibv_modify_qp");
	SYM(destroy_qp, "ibv_destroy_qp");
	SYM(fork_init, "ibv_fork_init");
	SYM(is_fork_initialized, "ibv_is_fork_initialized");
	SYM(wc_status_str, "ibv_wc_status_str");
	return NULL;
}

struct ibv_device **gt_get_device_list(int *n) { return L.get_device_list(n); }
void gt_free_device_list(struct ibv_device **l) { L.free_device_list(l); }
const char *gt_get_device_name(struct ibv_device *d) { return L.get_device_name(d); }
struct ibv_context *gt_open_device(struct ibv_device *d) { return L.open_device(d); }
int gt_close_device(struct ibv_context *c) { return L.close_device(c); }
int gt_query_device(struct ibv_context *c, struct ibv_device_attr *a) { return L.query_device(c, a); }

// gt_query_port is the header's ___ibv_query_port with the exported
// symbol called through its pointer: the extended op when the provider
// has one (it fills link_layer and flags), else the compatible call.
int gt_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) {
	memset(a, 0, sizeof(*a));
	struct verbs_context *v = verbs_get_ctx_op(c, query_port);
	if (!v) return L.query_port(c, port, a);
	return v->query_port(c, port, a, sizeof(*a));
}

int gt_query_gid(struct ibv_context *c, uint8_t port, int idx, union ibv_gid *g) { return L.query_gid(c, port, idx, g); }
struct ibv_pd *gt_alloc_pd(struct ibv_context *c) { return L.alloc_pd(c); }
int gt_dealloc_pd(struct ibv_pd *pd) { return L.dealloc_pd(pd); }
struct ibv_mr *gt_reg_mr(struct ibv_pd *pd, uintptr_t addr, size_t len, int access) {
	return L.reg_mr(pd, (void *)addr, len, access);
}
int gt_dereg_mr(struct ibv_mr *mr) { return L.dereg_mr(mr); }
struct ibv_comp_channel *gt_create_comp_channel(struct ibv_context *c) { return L.create_comp_channel(c); }
int gt_destroy_comp_channel(struct ibv_comp_channel *ch) { return L.destroy_comp_channel(ch); }
struct ibv_cq *gt_create_cq(struct ibv_context *c, int cqe, struct ibv_comp_channel *ch) {
	return L.create_cq(c, cqe, NULL, ch, 0);
}
int gt_destroy_cq(struct ibv_cq *cq) { return L.destroy_cq(cq); }
int gt_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq) {
	void *ctx;
	return L.get_cq_event(ch, cq, &ctx);
}
void gt_ack_cq_events(struct ibv_cq *cq, unsigned n) { L.ack_cq_events(cq, n); }
int gt_req_notify_cq(struct ibv_cq *cq) { return cq->context->ops.req_notify_cq(cq, 0); }

struct ibv_qp *gt_create_rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
	uint32_t send_wr, uint32_t recv_wr, uint32_t max_inline) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.cap.max_send_wr = send_wr;
	a.cap.max_recv_wr = recv_wr;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = max_inline;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	return L.create_qp(pd, &a);
}

int gt_qp_init(struct ibv_qp *qp, uint8_t port, int access) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qp_access_flags = access;
	return L.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int gt_qp_rtr(struct ibv_qp *qp, uint8_t port, uint32_t dest_qpn, uint32_t rq_psn, uint16_t dlid,
	const uint8_t *gid, int is_global, int sgid_index, int mtu, int max_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)mtu;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = max_rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = port;
	if (is_global) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
		a.ah_attr.grh.sgid_index = sgid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	return L.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

int gt_qp_rts(struct ibv_qp *qp, uint32_t sq_psn, int max_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = max_rd_atomic;
	return L.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int gt_qp_error(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	return L.modify_qp(qp, &a, IBV_QP_STATE);
}

int gt_destroy_qp(struct ibv_qp *qp) { return L.destroy_qp(qp); }
int gt_fork_init(void) { return L.fork_init(); }
int gt_fork_status(void) { return (int)L.is_fork_initialized(); }
const char *gt_wc_status_str(int status) { return L.wc_status_str((enum ibv_wc_status)status); }

int gt_poll_cq(struct ibv_cq *cq, int n, struct gt_wc *out) {
	struct ibv_wc wc[16];
	if (n > 16) n = 16;
	int got = cq->context->ops.poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++) {
		out[i].wr_id = wc[i].wr_id;
		out[i].status = wc[i].status;
		out[i].opcode = wc[i].opcode;
		out[i].byte_len = wc[i].byte_len;
		out[i].qp_num = wc[i].qp_num;
		out[i].imm = wc[i].imm_data;
		out[i].flags = wc[i].wc_flags;
	}
	return got;
}

int gt_post_send(struct ibv_qp *qp, uint64_t wr_id, int opcode, uintptr_t addr, uint32_t len,
	uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm, int flags) {
	struct ibv_sge sge = {.addr = addr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len > 0 ? 1 : 0;
	wr.opcode = (enum ibv_wr_opcode)opcode;
	wr.send_flags = flags;
	wr.imm_data = imm;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return qp->context->ops.post_send(qp, &wr, &bad);
}

int gt_post_recv(struct ibv_qp *qp, uint64_t wr_id, uintptr_t addr, uint32_t len, uint32_t lkey) {
	struct ibv_sge sge = {.addr = addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return qp->context->ops.post_recv(qp, &wr, &bad);
}

int gt_fork_hold(int fd, int wfd) {
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(wfd); // else the child's own copy keeps the pipe open
		// Only async-signal-safe calls in the child of a threaded process.
		while (read(fd, &c, 1) < 0 && errno == EINTR) {
		}
		_exit(0);
	}
	return pid;
}
