# drv.py ROUNDS SIZES OUT cfg...: each round runs the phase probe once (PROBE, default /tmp/probe: the
# cache-line round trip and synthetic copies), then the configurations in a balanced (Williams) order,
# REPS repetitions each (default 3), and appends one JSON line: rtt_min, rtt_med (ns), syn (GB/s) and
# res[config][size] = median MB/s. A config is name|BINARY|transport opts..., or vader (Open MPI 4.1.4
# ob1/vader, single copy none, with /tmp/anchor built from bench/mpistack/csrc/anchor.c), or
# vaderNAME|PROGRAM: the same with another anchor program (a wrapper that sets GLIBC_TUNABLES, say). ITERS and
# WARMUP, when set, are passed to both sides (unset: OSU's defaults for the size).
import json,subprocess,sys,os,statistics as st,time
rounds=int(sys.argv[1]); sizes=sys.argv[2]; out=open(sys.argv[3],'a'); cfgs=sys.argv[4:]
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
def sz(s):
    return [int(x[:-1])*1024 if x.endswith('K') else int(x[:-1])<<20 if x.endswith('M') else int(x) for x in s.split(',')]
env=dict(os.environ,OMPI_ALLOW_RUN_AS_ROOT='1',OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1')
for r in range(rounds):
    rec={'round':r,'t':time.time()}
    p=subprocess.run([os.environ.get('PROBE','/tmp/probe'),'1','0'],capture_output=True,text=True).stdout.split()
    rec['rtt_min']=int(p[2]); rec['rtt_med']=int(p[4]); rec['syn']={p[i]:float(p[i+1]) for i in range(len(p)-1) if p[i] in ('vv','mv','mm')}
    res={}
    for i in williams(len(cfgs),r):
        c=cfgs[i]
        if c.startswith('vader'):
            name,_,prog=c.partition('|')
            o=subprocess.run(['mpirun','-np','2','--mca','pml','ob1','--mca','btl','self,vader','--mca','btl_vader_single_copy_mechanism','none','--map-by','core','--bind-to','core',prog or '/tmp/anchor','bw',','.join(str(x) for x in sz(sizes)),os.environ.get('REPS','3'),os.environ.get('ITERS','0'),os.environ.get('WARMUP','0'),'64'],env=env,capture_output=True,text=True).stdout
            d={}
            for l in o.splitlines():
                f=l.split()
                if f and f[0]=='rep': d.setdefault(int(f[1]),[]).append(float(f[3]))
            res[name]={s:st.median(v) for s,v in d.items()}
        else:
            name,b,args=c.split('|'); a=args.split()
            o=subprocess.run([b,'bench','-t',a[0],'-p','bw','-s',sizes,'--reps',os.environ.get('REPS','3'),'-f','json']+(['--iters',os.environ['ITERS'],'--warmup',os.environ['WARMUP']] if os.environ.get('ITERS') else [])+a[1:],capture_output=True,text=True).stdout
            d={}
            for l in o.splitlines():
                j=json.loads(l)
                if j.get('type')=='point': d[j['size']]=st.median(j['samples'])
            res[name]=d
    rec['res']=res
    out.write(json.dumps(rec)+'\n'); out.flush()
