#!/usr/bin/env python3
# Warp-stall samples and executed instructions of an ncu SASS source page
# (`ncu -i REP --page source --print-source sass --csv`, gzipped), in blocks of
# N instructions: where a kernel spends its time (k-loop vs epilogue).
#   python3 scripts/sass-regions.py sass.csv.gz [N]
import csv,gzip,sys
rows=list(csv.reader(gzip.open(sys.argv[1],'rt')))
hdr=rows[1]; data=[r for r in rows[2:] if len(r)==len(hdr) and r[0].startswith("0x")]
ix={h:i for i,h in enumerate(hdr)}
S=lambda r,k: int(r[ix[k]].replace(',','') or 0)
tot=sum(S(r,'Warp Stall Sampling (All Samples)') for r in data)
n=len(data); step=int(sys.argv[2]) if len(sys.argv)>2 else 250
print('total samples',tot,'instructions',n)
for a in range(0,n,step):
    seg=data[a:a+step]
    smp=sum(S(r,'Warp Stall Sampling (All Samples)') for r in seg)
    ex=sum(S(r,'Instructions Executed') for r in seg)
    hg=sum('HGMMA' in r[1] for r in seg); bar=sum('BAR.SYNC' in r[1] for r in seg); stg=sum(' STG' in r[1] for r in seg); ldg=sum('LDG' in r[1] for r in seg); lds=sum('LDS' in r[1] for r in seg)
    noi=sum(S(r,'stall_no_inst') for r in seg); lsb=sum(S(r,'stall_long_sb') for r in seg); wt=sum(S(r,'stall_wait') for r in seg)
    if smp*1000>tot:
        print(f'{a:6d} samples {100*smp/tot:5.1f}% exec {ex:>10} hgmma {hg:3d} bar {bar} stg {stg:3d} ldg {ldg:3d} lds {lds:3d} noinst {100*noi/tot:4.1f}% longsb {100*lsb/tot:4.1f}% wait {100*wt/tot:4.1f}%')
