document.addEventListener('click', (e) => {
  const a = e.target.closest && e.target.closest('a[href*="__LINK_PREFIX__"]');
  if (!a) return;
  e.preventDefault();
  e.stopPropagation();
  const id = decodeURIComponent(a.getAttribute('href').split('__LINK_PREFIX__')[1] || '');
  trigger('select', {index: 0, value: id});
}, true);
