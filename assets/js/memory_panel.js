element.addEventListener('click', (e) => {
  const btn = e.target.closest('[data-do]');
  if (!btn) return;
  const item = btn.closest('[data-mid]');
  const d = {do: btn.dataset.do, id: item ? item.dataset.mid : '', sid: btn.dataset.sid || '', pk: btn.dataset.pk || ''};
  if (d.do === 'delete' && !window.confirm(btn.dataset.confirm || 'Delete?')) return;
  trigger('select', {index: 0, value: JSON.stringify(d)});
});
