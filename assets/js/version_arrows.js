const chatOf = () => document.getElementById('ac-chat');
const wanted = () => {
  const d = element.querySelector('[data-points]');
  try { return d ? JSON.parse(d.dataset.points) : []; } catch (e) { return []; }
};
const sig = (p) => `${p.index}:${p.n}/${p.m}@${p.row}${p.after ? '+' : ''}`;
const make = (p, labels) => {
  const box = document.createElement('div');
  box.className = 'ac-vswitch';
  box.dataset.sig = sig(p);
  const btn = (text, step, label, off) => {
    const b = document.createElement('button');
    b.type = 'button'; b.textContent = text; b.dataset.index = p.index; b.dataset.step = step;
    b.setAttribute('aria-label', label); b.title = label; b.disabled = off;
    return b;
  };
  const n = document.createElement('span');
  n.className = 'ac-vswitch-n'; n.textContent = `${p.n} / ${p.m}`;
  box.append(btn('‹', -1, labels.prev, p.n <= 1), n, btn('›', 1, labels.next, p.n >= p.m));
  return box;
};
let queued = false;
const place = () => {
  queued = false;
  const chat = chatOf();
  if (!chat) return;
  const d = element.querySelector('[data-points]');
  const labels = {prev: d ? d.dataset.prev : 'Previous version', next: d ? d.dataset.next : 'Next version'};
  const points = wanted();
  const keep = new Set(points.map(sig));
  chat.querySelectorAll('.ac-vswitch').forEach((el) => { if (!keep.has(el.dataset.sig)) el.remove(); });
  const rows = chat.querySelectorAll('.message-row');
  for (const p of points) {
    const row = rows[p.row] || (p.after ? rows[rows.length - 1] : null);
    // One set per point: drop it from a row it no longer belongs to (the reply row appeared).
    chat.querySelectorAll(`.ac-vswitch[data-sig="${sig(p)}"]`).forEach((el) => { if (!row || !row.contains(el)) el.remove(); });
    if (!row || row.querySelector(`.ac-vswitch[data-sig="${sig(p)}"]`)) continue;
    (row.querySelector('.flex-wrap') || row).appendChild(make(p, labels));
  }
};
const later = () => { if (!queued) { queued = true; requestAnimationFrame(place); } };
new MutationObserver(later).observe(document.body, {childList: true, subtree: true});
document.addEventListener('click', (e) => {
  const b = e.target.closest && e.target.closest('.ac-vswitch button');
  if (!b || b.disabled) return;
  e.preventDefault();
  e.stopPropagation();
  b.disabled = true;  // one switch per click; the chat re-renders with fresh arrows
  trigger('select', {index: Number(b.dataset.index), value: b.dataset.step});
}, true);
later();
