# pb.py FILE A B: per RTT bucket (probe's minimum cache-line round trip), median over rounds of B/A per size, and A's median GB/s
import json,sys,statistics as st,collections
recs=[json.loads(l) for l in open(sys.argv[1])]; a,b=sys.argv[2],sys.argv[3]
def bucket(r): m=r['rtt_min']; return 'rtt<=50ns' if m<=50 else 'rtt60-90ns' if m<100 else 'rtt>=100ns (spell)'
g=collections.defaultdict(list)
for r in recs: g[bucket(r)].append(r)
for k in sorted(g):
    rs=g[k]; print('==',k,len(rs),'rounds')
    for z in sorted(rs[0]['res'][a],key=int):
        q=sorted(r['res'][b][z]/r['res'][a][z] for r in rs)
        print('  %8s %s %.1f GB/s  %s %.1f GB/s  %s/%s %.3f [%.2f-%.2f]'%(z,a,st.median(r['res'][a][z] for r in rs)/1000,b,st.median(r['res'][b][z] for r in rs)/1000,b,a,st.median(q),q[len(q)//4],q[3*len(q)//4]))
