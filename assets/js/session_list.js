element.addEventListener('click', (e) => {
  if (e.target.closest('[data-more]')) { trigger('expand', {}); return; }
  const row = e.target.closest('[data-sid]');
  if (!row) return;
  element.querySelectorAll('.ac-session.active').forEach((x) => x.classList.remove('active'));
  row.classList.add('active');
  trigger('select', {index: row.dataset.sid, value: row.dataset.sid});
});
// The next page of the list when its "Show more" row scrolls into view (once per page).
let asked = null;
document.addEventListener('scroll', () => {
  const more = element.querySelector('[data-more]');
  if (!more || more === asked) return;
  const r = more.getBoundingClientRect();
  if (r.top < window.innerHeight + 200 && r.bottom > 0) { asked = more; trigger('expand', {}); }
}, true);
