// Column choice of a contact upload: the phone and name columns are never also kept as
// attributes, so their boxes are disabled (and unticked) while they are chosen.
(function () {
  "use strict";
  var form = document.getElementById("mapping-form");
  if (!form) { return; }
  var phone = form.querySelector("select[name=phone_column]");
  var name = form.querySelector("select[name=name_column]");
  var boxes = form.querySelectorAll("input[name=attribute_columns]");

  function sync() {
    var taken = [phone ? phone.value : "", name ? name.value : ""];
    boxes.forEach(function (box) {
      var isTaken = taken.indexOf(box.value) !== -1;
      if (isTaken) { box.checked = false; }
      box.disabled = isTaken;
    });
  }
  if (phone) { phone.addEventListener("change", sync); }
  if (name) { name.addEventListener("change", sync); }
  sync();
})();
