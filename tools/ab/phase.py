# phase.py RAW.json BASE SIZE THRESHOLD: per-size median ratios against BASE, split into rounds where BASE at SIZE was below THRESHOLD (slow) or not (fast).
import json,sys,statistics as st
r=json.load(open(sys.argv[1])); base=sys.argv[2]; ps=sys.argv[3]; thr=float(sys.argv[4])
names=[n for n in r[ps] if n!=base]
ph=r[ps][base]
print('phase by',base,'at',ps,'<',thr,': slow rounds',sum(1 for p in ph if p<thr),'of',len(ph))
for s in sorted(r,key=int):
    row=[s]
    for n in names:
        sl=[a/b for a,b,p in zip(r[s][n],r[s][base],ph) if p<thr]
        fa=[a/b for a,b,p in zip(r[s][n],r[s][base],ph) if p>=thr]
        row.append('%s slow %.3f fast %.3f'%(n,st.median(sl) if sl else 0,st.median(fa) if fa else 0))
    row.append('abs %s slow %.1f fast %.1f'%(base,st.median([b for b,p in zip(r[s][base],ph) if p<thr] or [0])/1000,st.median([b for b,p in zip(r[s][base],ph) if p>=thr] or [0])/1000))
    print(*row,sep=' | ')
