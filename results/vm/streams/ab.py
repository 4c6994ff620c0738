# ab.py ROUNDS SIZES BUFFERS OUT name|opts ... ; 'vader' runs /tmp/anchorD with ANCHOR_BUFFERS
import json,subprocess,sys,os,statistics as st
rounds=int(sys.argv[1]); sizes=sys.argv[2]; nb=sys.argv[3]; out=open(sys.argv[4],'a'); cfgs=sys.argv[5:]
def sz(s): return [int(x[:-1])*1024 if x.endswith('K') else int(x[:-1])<<20 if x.endswith('M') else int(x) for x in s.split(',')]
env=dict(os.environ,OMPI_ALLOW_RUN_AS_ROOT='1',OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',ANCHOR_BUFFERS=nb)
for r in range(rounds):
  res={}
  order=cfgs[r%len(cfgs):]+cfgs[:r%len(cfgs)]
  if r%2: order=order[::-1]
  for c in order:
    name,_,opts=c.partition('|')
    if name.startswith('vader'):
      o=subprocess.run(['mpirun','-np','2','--mca','pml','ob1','--mca','btl','self,vader','--mca','btl_vader_single_copy_mechanism','none','--map-by','core','--bind-to','core','-x','ANCHOR_BUFFERS']+opts.split()+['/tmp/anchorD','bw',','.join(str(x) for x in sz(sizes)),os.environ.get('REPS','3'),'0','0','64'],env=env,capture_output=True,text=True).stdout
      d={}
      for l in o.splitlines():
        f=l.split()
        if f and f[0]=='rep': d.setdefault(int(f[1]),[]).append(float(f[3]))
      res[name]={s:st.median(v) for s,v in d.items()}
    else:
      a=opts.split()
      b=a[0] if a and a[0].startswith('bin/') else 'bin/gotune'
      if a and a[0].startswith('bin/'): a=a[1:]
      o=subprocess.run([b,'bench','-t','sm','-p','bw','-s',sizes,'--reps',os.environ.get('REPS','3'),'-f','json','--cpus','0,1','--buffers',nb]+[x for k in a for x in ('--opt',k)],capture_output=True,text=True)
      d={}
      for l in o.stdout.splitlines():
        j=json.loads(l)
        if j.get('type')=='point': d[j['size']]=st.median(j['samples'])
      if not d: print(name,o.stderr[-500:],file=sys.stderr)
      res[name]=d
  out.write(json.dumps({'round':r,'res':res})+'\n'); out.flush()
  print(r,' '.join('%s:%s'%(n,'/'.join('%.1f'%(v[k]/1000) for k in sorted(v))) for n,v in res.items()),flush=True)
