import json,sys,statistics as st
recs=[json.loads(l) for l in open(sys.argv[1])]
thr=float(sys.argv[2]) if len(sys.argv)>2 else 30000
rounds={}
for r in recs: rounds.setdefault(r['round'],{})[r['cfg']]=r
slow={k for k,v in rounds.items() if 'auto' in v and v['auto']['bw']<thr}
print('slow rounds',len(slow),'of',len(rounds))
for cfg in ('auto','in','movsb'):
    for ph,sel in (('slow',lambda k:k in slow),('fast',lambda k:k not in slow)):
        rs=[v[cfg] for k,v in rounds.items() if sel(k) and cfg in v]
        if not rs: continue
        m=lambda f:st.median([x[f] for x in rs])
        print(f"{cfg:6s} {ph}: bw {m('bw')/1000:.1f} GB/s  in {m('in'):.0f} ns/KiB  out {m('out'):.0f} ns/KiB  n={len(rs)}")
