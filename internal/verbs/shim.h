// Shims between Go and libibverbs, which is loaded at run time with
// dlopen: no symbol of libibverbs is linked, so a gotune binary starts on a
// machine without rdma-core. Every exported function is called through a
// pointer resolved by gt_load; the header's inline functions (post, poll,
// notify) go through the context's ops table, as the header's own do.
#ifndef GOTUNE_VERBS_SHIM_H
#define GOTUNE_VERBS_SHIM_H

#include <stdint.h>
#include <infiniband/verbs.h>

// gt_load opens libibverbs (name) and resolves what gotune calls; it
// returns NULL or a static message saying what is missing.
const char *gt_load(const char *name);

struct ibv_device **gt_get_device_list(int *n);
void gt_free_device_list(struct ibv_device **l);
const char *gt_get_device_name(struct ibv_device *d);
struct ibv_context *gt_open_device(struct ibv_device *d);
int gt_close_device(struct ibv_context *c);
int gt_query_device(struct ibv_context *c, struct ibv_device_attr *a);
int gt_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a);
int gt_query_gid(struct ibv_context *c, uint8_t port, int idx, union ibv_gid *g);
struct ibv_pd *gt_alloc_pd(struct ibv_context *c);
int gt_dealloc_pd(struct ibv_pd *pd);
struct ibv_mr *gt_reg_mr(struct ibv_pd *pd, uintptr_t addr, size_t len, int access);
int gt_dereg_mr(struct ibv_mr *mr);
struct ibv_comp_channel *gt_create_comp_channel(struct ibv_context *c);
int gt_destroy_comp_channel(struct ibv_comp_channel *ch);
struct ibv_cq *gt_create_cq(struct ibv_context *c, int cqe, struct ibv_comp_channel *ch);
int gt_destroy_cq(struct ibv_cq *cq);
int gt_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq);
void gt_ack_cq_events(struct ibv_cq *cq, unsigned n);
int gt_req_notify_cq(struct ibv_cq *cq);
struct ibv_qp *gt_create_rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
	uint32_t send_wr, uint32_t recv_wr, uint32_t max_inline);
int gt_qp_init(struct ibv_qp *qp, uint8_t port, int access);
int gt_qp_rtr(struct ibv_qp *qp, uint8_t port, uint32_t dest_qpn, uint32_t rq_psn, uint16_t dlid,
	const uint8_t *gid, int is_global, int sgid_index, int mtu, int max_rd_atomic);
int gt_qp_rts(struct ibv_qp *qp, uint32_t sq_psn, int max_rd_atomic);
int gt_qp_error(struct ibv_qp *qp);
int gt_destroy_qp(struct ibv_qp *qp);
int gt_fork_init(void);
int gt_fork_status(void);
const char *gt_wc_status_str(int status);

// A work completion, the fields gotune reads.
struct gt_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t qp_num;
	uint32_t imm;
	uint32_t flags;
};

int gt_poll_cq(struct ibv_cq *cq, int n, struct gt_wc *out);
// gt_post_send posts one work request of one scatter/gather entry (none
// when len is 0); flags are IBV_SEND_* flags.
int gt_post_send(struct ibv_qp *qp, uint64_t wr_id, int opcode, uintptr_t addr, uint32_t len,
	uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm, int flags);
int gt_post_recv(struct ibv_qp *qp, uint64_t wr_id, uintptr_t addr, uint32_t len, uint32_t lkey);

#endif

// gt_fork_hold forks a child that shares nothing but the parent's address
// space as fork leaves it (copy-on-write, or copied, or absent for
// MADV_DONTFORK ranges) and holds it: it blocks reading fd and exits when
// the parent closes the other end, wfd (which the child closes first).
// It returns the child's pid, or -1.
int gt_fork_hold(int fd, int wfd);
