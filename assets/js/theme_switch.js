element.addEventListener('click', (e) => {
  const b = e.target.closest('[data-ac-theme]');
  if (b && window.acTheme) window.acTheme.set(b.dataset.acTheme);
});
if (window.acTheme) window.acTheme.apply();
