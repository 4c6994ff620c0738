# an.py FILE: per round and per probe bucket, vader GB/s and every gotune configuration over vader (needs a vader config).
import json,sys,statistics as st,collections
recs=[json.loads(l) for l in open(sys.argv[1])]
cf=[c for c in recs[0]['res'] if c!='vader']
sizes=sorted(recs[0]['res']['vader'],key=int)
def bucket(r): 
    m=r['rtt_min']; return 'lo<=50' if m<=50 else 'mid60-90' if m<100 else 'deep'
print('round rtt syn(vv mv mm) | per size: vader GB/s, then config/vader')
for r in recs:
    s=' '.join('%.0f'%r['syn'][k] for k in ('vv','mv','mm'))
    row=[]
    for z in sizes:
        v=r['res']['vader'][z]; row.append('%s:%.0f %s'%(z,v/1000,' '.join('%.2f'%(r['res'][c][z]/v) for c in cf)))
    print(r['round'],r['rtt_min'],r['rtt_med'],s,'|',' | '.join(row))
g=collections.defaultdict(list)
for r in recs: g[bucket(r)].append(r)
for b,rs in g.items():
    print('==',b,len(rs),'rounds; syn vv/mv/mm', ' '.join('%.0f'%st.median([r['syn'][k] for r in rs]) for k in ('vv','mv','mm')))
    for z in sizes:
        print('  ',z,'vader %.1f'%(st.median([r['res']['vader'][z] for r in rs])/1000),' '.join('%s %.1f (%.2f)'%(c,st.median([r['res'][c][z] for r in rs])/1000,st.median([r['res'][c][z]/r['res']['vader'][z] for r in rs])) for c in cf))
