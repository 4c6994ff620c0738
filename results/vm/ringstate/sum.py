# sum.py LOG: per configuration of a probe2 log, the median GB/s and sender/receiver ns per KiB over
# every round, split by phase: "B" rounds are those where movsb both ways through the largest ring ran
# below 30 GB/s while the round trip stayed under 100 ns; "spell" rounds have a round trip of 100 ns
# or more; "A" is the rest.
import re,sys,statistics as st,collections
rows=[]
for l in open(sys.argv[1]):
    if l.startswith('#'): continue
    m=re.match(r'\d+ rtt_min (\d+) med (\d+) ns(.*)',l)
    if not m: continue
    cf=re.findall(r' (\d+/\d+/\d+/\d+) ([\d.]+) \[s (\d+) r (\d+)\]',m.group(3))
    rows.append((int(m.group(1)),{c:(float(g),int(s),int(r)) for c,g,s,r in cf}))
big=max(rows[0][1],key=lambda c:(c.startswith('3/0/0/'),int(c.split('/')[3])))
def phase(rtt,res):
    if rtt>=100: return 'spell'
    return 'B' if res[big][0]<30 else 'A'
g=collections.defaultdict(list)
for rtt,res in rows: g[phase(rtt,res)].append(res)
print('phase key: %s below 30 GB/s = B'%big)
for ph in ('A','B','spell'):
    rs=g.get(ph,[])
    if not rs: continue
    print('== %s: %d rounds'%(ph,len(rs)))
    for c in rows[0][1]:
        v=[r[c] for r in rs]
        print('  %-14s %5.1f GB/s  [s %3.0f r %3.0f ns/KiB]'%(c,st.median(x[0] for x in v),st.median(x[1] for x in v),st.median(x[2] for x in v)))
