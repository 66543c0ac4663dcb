"""The dashboard's frame: inline CSS (light and dark) and the table script. Nothing is fetched."""

from __future__ import annotations

from html import escape

from modules.reports.common import OUTCOME_COLORS

CSS = (
    """
:root{--bg:#f7f7f5;--fg:#1d1d1b;--muted:#6b6b66;--card:#fff;--line:#e3e3de;--track:#eeeee9}
@media (prefers-color-scheme:dark){:root{--bg:#161615;--fg:#e8e8e3;--muted:#a3a39c;
--card:#21211f;--line:#3a3a36;--track:#2c2c29}}
*{box-sizing:border-box}
body{margin:0;padding:20px 24px;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header h1{font-size:20px;margin:0 0 4px}header p{margin:0 0 16px;color:var(--muted)}
a{color:inherit}code{font:12px ui-monospace,Menlo,Consolas,monospace}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px;margin-bottom:14px}
.tile{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.tile b{display:block;font-size:20px}.tile span{color:var(--muted);font-size:12px}
.tile.bad{border-color:#d64541}.tile.bad b{color:#d64541}.tile.good b{color:#2e9d4f}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:14px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px;min-width:0}
.card.wide{grid-column:1/-1}.card h2{font-size:15px;margin:0 0 8px}.card h3{font-size:13px;margin:8px 0 4px}
.chart{width:100%;height:auto;display:block}
.chart .grid{stroke:var(--line);stroke-width:1}.chart .tick,.chart .empty{fill:var(--muted);font-size:11px}
.chart .track{fill:var(--track)}
.legend{display:flex;flex-wrap:wrap;gap:4px 12px;font-size:12px;color:var(--muted);margin:4px 0}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);
vertical-align:top}th{font-weight:600;color:var(--muted);font-size:12px}td.num,.num{text-align:right;
font-variant-numeric:tabular-nums;white-space:nowrap}table.small{margin-top:8px;font-size:12px}
#iterations td:first-child{white-space:nowrap;font:12px ui-monospace,Menlo,Consolas,monospace}
.o{font-size:11px;font-weight:600;padding:1px 6px;border-radius:9px;color:#fff}
"""
    + "".join(f".o-{name}{{background:{color}}}" for name, color in OUTCOME_COLORS.items())
    + """
#controls{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin-bottom:6px}
#controls[hidden]{display:none}select,input,button{font:inherit;padding:2px 6px}
#shown{color:var(--muted);margin:4px 0}
"""
)

# Filters and pages over every row; builds cells with textContent only (titles are user text).
SCRIPT = """
(function(){
var D=JSON.parse(document.getElementById('data').textContent),O=D.outcomes,R=D.rows;
var per=100,page=0,shown=R,tb=document.querySelector('#iterations tbody');
var fo=document.getElementById('f-outcome'),fs=document.getElementById('f-source'),
ft=document.getElementById('f-text'),info=document.getElementById('pageinfo'),
note=document.getElementById('shown');
function money(c){return c!==0&&Math.abs(c)<1?'$'+c.toFixed(4):'$'+c.toLocaleString('en-US',
{minimumFractionDigits:2,maximumFractionDigits:2})}
function secs(s){if(s<60)return s.toFixed(1)+'s';var w=Math.round(s);
if(w<3600)return Math.floor(w/60)+'m'+String(w%60).padStart(2,'0')+'s';
return Math.floor(w/3600)+'h'+String(Math.floor(w%3600/60)).padStart(2,'0')+'m'}
function cell(tr,text,cls){var td=document.createElement('td');if(cls)td.className=cls;
if(text!==null)td.textContent=text;tr.appendChild(td);return td}
function row(r){var tr=document.createElement('tr'),a=document.createElement('a');
a.href=r[0]+'/report.md';a.textContent=r[0];cell(tr,null).appendChild(a);cell(tr,r[1]);
var o=cell(tr,null),b=document.createElement('span');b.className='o o-'+O[r[2]];
b.textContent=O[r[2]];o.appendChild(b);if(r[3]){var s=document.createElement('small');
s.textContent=' '+r[3];o.appendChild(s)}cell(tr,r[4]);cell(tr,r[5]);
cell(tr,money(r[6]),'num');cell(tr,secs(r[7]),'num');return tr}
function draw(){var pages=Math.max(1,Math.ceil(shown.length/per)),f=document.createDocumentFragment();
page=Math.min(page,pages-1);shown.slice(page*per,(page+1)*per).forEach(function(r){f.appendChild(row(r))});
tb.textContent='';tb.appendChild(f);info.textContent=' page '+(page+1)+' of '+pages+' ';
note.textContent=shown.length.toLocaleString('en-US')+' of '+R.length.toLocaleString('en-US')+
' iteration'+(R.length===1?'':'s')+', newest first.'}
function apply(){var o=fo.value,s=fs.value,q=ft.value.toLowerCase();shown=R.filter(function(r){
return(!o||O[r[2]]===o)&&(!s||r[4]===s)&&(!q||(r[0]+' '+r[5]+' '+r[3]).toLowerCase().indexOf(q)>=0)});
page=0;draw()}
fo.onchange=fs.onchange=apply;ft.oninput=apply;
document.getElementById('prev').onclick=function(){if(page>0){page--;draw()}};
document.getElementById('next').onclick=function(){page++;draw()};
document.getElementById('controls').hidden=false;draw();
document.body.setAttribute('data-ready','1');
})();
"""


def document(title: str, body: str) -> str:
    """A complete HTML document around body, with the page's style and script inline."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body>{body}<script>{SCRIPT}</script></body></html>\n"
    )
