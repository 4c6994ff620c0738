# cs.py ROUNDS SIZE: per round, bw of auto and sm.copy=in (movsb into the ring) with per-rank copy timings
import json,subprocess,sys,os,statistics as st
rounds=int(sys.argv[1]); size=sys.argv[2]; out=open(sys.argv[3],'a')
cfgs=[('auto',[]),('in',['--opt','sm.copy=in']),('movsb',['--opt','sm.copy=movsb'])]
for r in range(rounds):
    for name,extra in (cfgs if r%2==0 else cfgs[::-1]):
        f='/tmp/cs.jsonl'
        if os.path.exists(f): os.remove(f)
        e=dict(os.environ); e['GOTUNE_COPYSTATS']=f
        o=subprocess.run(['/tmp/gt-instr','bench','-t','sm','-p','bw','-s',size,'--reps','3','-f','json']+extra,env=e,capture_output=True,text=True).stdout
        bw=[st.median(json.loads(l)['samples']) for l in o.splitlines() if json.loads(l).get('type')=='point'][0]
        stats=[json.loads(l) for l in open(f)] if os.path.exists(f) else []
        rec={'round':r,'cfg':name,'bw':bw,'in':max([s['in'] for s in stats] or [0]),'out':max([s['out'] for s in stats] or [0])}
        out.write(json.dumps(rec)+'\n'); out.flush()
