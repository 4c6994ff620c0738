# ab.py ROUNDS SIZES 'name|ENV|TRANSPORT ARGS...' ...: interleaved A/B of gotune bench configurations (Williams order);
# ENV may set GTBIN (the gotune binary, default bin/gotune), RAW (raw per-round JSON), REPS, PAT (pattern, default bw).
import json,subprocess,sys,os,statistics as st
rounds=int(sys.argv[1]); sizes=sys.argv[2]; cfgs=[c.split('|') for c in sys.argv[3:]]
res={}
def williams(n, r):
    first=[0]*n; lo,hi=1,n-1
    for i in range(1,n):
        if i%2: first[i]=lo; lo+=1
        else: first[i]=hi; hi-=1
    rows=n if n%2==0 else 2*n
    k=r%rows
    row=[(f+k)%n for f in first] if k<n else list(reversed([(f+k-n)%n for f in first]))
    label=[0]*n
    for i,c in enumerate(first): label[c]=i
    return [label[c] for c in row]
for r in range(rounds):
    order=[cfgs[i] for i in williams(len(cfgs), r)]
    for name,ev,args in order:
        e=dict(os.environ)
        for kv in ev.split():
            k,v=kv.split('='); e[k]=v
        a=args.split()
        out=subprocess.run([e.get('GTBIN','bin/gotune'),'bench','-t',a[0],'-p',os.environ.get('PAT','bw'),'-s',sizes,'--reps',os.environ.get('REPS','1'),'-f','json']+a[1:],env=e,capture_output=True,text=True).stdout
        for l in out.splitlines():
            d=json.loads(l)
            if d.get('type')=='point': res.setdefault(d['size'],{}).setdefault(name,[]).append(st.median(d['samples']))
names=[c[0] for c in cfgs]
json.dump(res,open(os.environ.get("RAW","raw.json"),"w"))
print('median of per-round ratios vs', names[0], '[q1-q3]')
import math
lg={n:[] for n in names[1:]}
for s in sorted(res):
    base=res[s][names[0]]
    out=[]
    for n in names[1:]:
        rs=sorted(a/b for a,b in zip(res[s][n],base))
        q=lambda f: rs[int(f*(len(rs)-1))]
        m=st.median(rs); lg[n].append(math.log(m))
        out.append('%.3f[%.2f-%.2f]'%(m,q(.25),q(.75)))
    print(s,*out)
print('geomean', *['%.3f'%math.exp(sum(v)/len(v)) for v in lg.values()])
