# spells.py ANCHORS.jsonl [SIZE...]: for each bw size, every contender's samples in round order (GB/s)
# and how many fall below 0.6x that contender's best sample at the size (rounds caught in a slow
# spell). When two contenders caught different numbers of spell rounds, the ratio of their medians
# says more about the spells than about the transports; the round-paired ratio says less.
import json,sys,collections
runs=collections.defaultdict(list)
for l in open(sys.argv[1]):
    j=json.loads(l)
    if j.get('type')=='point' and j['pattern']=='bw': runs[(j['label'],j['size'])].extend(j['samples'])
want={int(x) for x in sys.argv[2:]}
for size in sorted({s for _,s in runs}):
    if want and size not in want: continue
    for lab in sorted({l for l,s in runs if s==size}):
        v=runs[(lab,size)]; top=max(v)
        print('%9d %-20s slow %2d/%d  %s'%(size,lab,sum(x<0.6*top for x in v),len(v),' '.join('%.0f'%(x/1000) for x in v)))
