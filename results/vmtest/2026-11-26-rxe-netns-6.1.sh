#!/bin/sh
IP=/bin/ip
set -x
unshare -n -u sh -c 'hostname h1; exec sleep 1000' & p1=$!
unshare -n -u sh -c 'hostname h2; exec sleep 1000' & p2=$!
sleep 1
$IP link add veth2 type veth peer name veth3
$IP link set veth2 netns $p1
$IP link set veth3 netns $p2
nsenter -t $p1 -n -u sh -c "hostname; $IP link set lo up; $IP addr add 10.9.1.1/24 dev veth2; $IP link set veth2 up; rdma link add rxe1 type rxe netdev veth2; $IP addr"
nsenter -t $p2 -n -u sh -c "hostname; $IP link set lo up; $IP addr add 10.9.1.2/24 dev veth3; $IP link set veth3 up; rdma link add rxe2 type rxe netdev veth3"
rdma link
nsenter -t $p1 -n ping -c 1 10.9.1.2
ibv_devinfo -v | grep -E 'hca_id|GID'
for i in 1 2; do cat /sys/class/infiniband/rxe$i/ports/1/gid_attrs/ndevs/1; done
nsenter -t $p1 -n -u timeout 20 ibv_rc_pingpong -d rxe1 -g 1 -n 5 & s=$!
sleep 1
nsenter -t $p2 -n -u timeout 20 ibv_rc_pingpong -d rxe2 -g 1 -n 5 10.9.1.1
echo client rc $?
wait $s; echo server rc $?
dmesg | tail -20
