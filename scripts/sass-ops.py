#!/usr/bin/env python3
# Warp-stall samples and executed instructions per SASS opcode of an ncu
# SASS source page (`ncu -i REP --page source --print-source sass --csv`,
# gzipped): python3 scripts/sass-ops.py FILE.csv.gz
import csv,gzip,sys,collections,re
f=sys.argv[1]
rows=list(csv.reader(gzip.open(f,'rt')))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
stalls=[h for h in hdr if h.startswith('stall_') and '(Not' not in h]
seen=set()
byop=collections.defaultdict(collections.Counter); ex=collections.Counter()
n=0
for r in data:
    if len(r)<len(hdr)-1: continue
    if r[ix['Address']] in seen: continue
    seen.add(r[ix['Address']])
    try: s=int(r[ix['Warp Stall Sampling (All Samples)']])
    except: continue
    src=r[ix['Source']].strip()
    src=re.sub(r'^@!?U?P\w+\s+','',src)
    op=src.split()[0] if src else '?'
    op=op.split('.')[0]
    n+=s
    byop[op]['samples']+=s
    try: ex[op]+=int(r[ix['Instructions Executed']])
    except: pass
    for h in stalls:
        try: byop[op][h]+=int(r[ix[h]])
        except: pass
print('total',n,'instructions executed',sum(ex.values()))
for op,c in sorted(byop.items(),key=lambda kv:-kv[1]['samples'])[:25]:
    top=sorted(((k,v) for k,v in c.items() if k!='samples'),key=lambda kv:-kv[1])[:4]
    print('%-12s %5.1f%% exec %5.1f%%  %s'%(op,100*c['samples']/n,100*ex[op]/sum(ex.values()),' '.join('%s=%.1f%%'%(k[6:],100*v/n) for k,v in top)))
